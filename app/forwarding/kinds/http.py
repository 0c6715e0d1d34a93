"""The HTTP kind: each message POSTed to a URL, its body as the provider sent it, signed
the Standard Webhooks way (so hooklatch, or any Standard Webhooks library, verifies it at
the other end), with the event's identity in ``Hooklatch-*`` headers.

Only a 2xx answer delivers. A redirect is never followed: the signature holds for the
URL configured, and a receiver that moved should be configured again."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import ClassVar
from urllib.parse import quote

import requests

from hooklatch.forwarding.kinds.base import Connection, Field, Outcome
from hooklatch.forwarding.kinds.checks import checked_url, settings_of, shown_url, split
from hooklatch.forwarding.kinds.failures import os_reason
from hooklatch.forwarding.message import Message
from hooklatch.providers.standard_webhooks import WHSEC_PREFIX, hmac_key, signed_headers

# How many requests one publisher has in flight at once.
CONCURRENCY = 8
# What a percent-encoded header value keeps as it is: printable ASCII but the escape.
SAFE_IN_HEADER = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


class HttpKind:
    name: ClassVar[str] = "http"
    fields: ClassVar[Mapping[str, Field]] = {
        "url": Field(
            "the receiver's http:// or https:// URL (it may carry a token)",
            required=True,
            secret=True,
        ),
        "signing_secret": Field(
            "the Standard Webhooks secret (whsec_<base64>) the receiver verifies with",
            required=True,
            secret=True,
        ),
    }

    def check(self, given: Mapping[str, str]) -> Connection:
        values = settings_of(self.name, self.fields, given)
        parts = checked_url(values["url"], schemes=("http", "https"))
        secret = values["signing_secret"]
        if not (secret.startswith(WHSEC_PREFIX) and hmac_key(secret)):
            raise ValueError("signing_secret should be whsec_ followed by base64")
        return split(self.fields, values, shown=shown_url(parts))

    def open(self, connection: Connection, *, timeout: float) -> HttpPublisher:
        return HttpPublisher(
            connection.secrets["url"], connection.secrets["signing_secret"], timeout=timeout
        )


class HttpPublisher:
    """Sends each call's messages from a small pool of threads, each with its own
    requests Session (so connections to the receiver are kept and reused)."""

    at_once = CONCURRENCY

    def __init__(self, url: str, signing_secret: str, *, timeout: float) -> None:
        self._url = url
        self._secret = signing_secret
        self._timeout = timeout
        self._pool = ThreadPoolExecutor(CONCURRENCY, thread_name_prefix="forward-http")
        self._local = threading.local()
        self._sessions: list[requests.Session] = []

    def publish(self, messages: Sequence[Message]) -> list[Outcome]:
        return list(self._pool.map(self._send, messages))

    def close(self) -> None:
        self._pool.shutdown()
        for session in self._sessions:
            session.close()

    def _send(self, message: Message) -> Outcome:
        try:
            # The answer's body is never read: a receiver cannot make it large.
            response = self._session().post(
                self._url,
                data=message.body,
                headers=self._headers(message),
                timeout=self._timeout,
                allow_redirects=False,
                stream=True,
            )
        except requests.Timeout:
            return Outcome(delivered=False, error=f"no answer within {self._timeout:g} s")
        except requests.RequestException as error:
            reason = os_reason(error) or f"request failed ({type(error).__name__})"
            return Outcome(delivered=False, error=reason)
        except Exception as error:  # a message the library cannot send: this one fails
            return Outcome(delivered=False, error=f"cannot be sent ({type(error).__name__})")
        response.close()
        if 200 <= response.status_code < 300:
            return Outcome(delivered=True)
        return Outcome(delivered=False, error=_refusal(response.status_code))

    def _headers(self, message: Message) -> dict[str, str]:
        key = header_value(message.key)  # as the Hooklatch-Idempotency-Key header carries it
        signed = signed_headers(self._secret, key, now=datetime.now(UTC), body=message.body)
        identity = {name: header_value(value) for name, value in message.headers().items()}
        return {"Content-Type": header_value(message.content_type), **identity, **signed}

    def _session(self) -> requests.Session:
        """This thread's session, made on its first request."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
            self._sessions.append(session)
        return session


def _refusal(status: int) -> str:
    if 300 <= status < 400:
        return f"HTTP {status} (a redirect, which is not followed)"
    return f"HTTP {status}"


def header_value(value: str) -> str:
    """A header value as HTTP carries it: printable ASCII as it is; anything else (text a
    sender chose: an event type, an id, an ordering key) percent-encoded as UTF-8."""
    if value.isascii() and value.isprintable():
        return value
    return quote(value, safe=SAFE_IN_HEADER)
