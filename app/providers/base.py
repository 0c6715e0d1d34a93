"""The provider plugin contract.

A provider is a class registered under the entry-point group
``hooklatch.providers``. hooklatch instantiates it once at start and calls:

- ``verify(headers, body, *, secrets, now)``: pure; raises VerificationError
  (or MalformedRequest) with a machine reason, returns None when any of the
  endpoint's active secrets verifies the exact bytes received.
- ``parse(headers, body)``: the events in the request (dedupe key, type, time).
- ``handshake(headers, body)``: an answer for a registration handshake, or None;
  called only after ``verify`` passed.
- ``sign(body, *, secret, now)``: headers that make a valid test delivery.

``headers`` is a mapping with lower-case names. ``body`` is the raw bytes.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from app.errors import MalformedRequest, VerificationError


@dataclass(frozen=True)
class IncomingEvent:
    external_id: str
    type: str
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class HandshakeResponse:
    body: bytes
    content_type: str = "application/json"
    status: int = 200


class Provider:
    name: ClassVar[str] = ""
    # How long the provider keeps re-sending one event; dedupe keys must outlive it.
    retry_window: ClassVar[timedelta] = timedelta(days=3)
    # True where the receiver chooses the secret and tells the provider (GitHub).
    generates_secret: ClassVar[bool] = False
    # Largest clock difference accepted, where the provider signs a timestamp.
    tolerance: ClassVar[timedelta] = timedelta(minutes=5)

    def verify(
        self,
        headers: Mapping[str, str],
        body: bytes,
        *,
        secrets: Sequence[str],
        now: datetime,
    ) -> None:
        raise NotImplementedError

    def parse(self, headers: Mapping[str, str], body: bytes) -> list[IncomingEvent]:
        raise NotImplementedError

    def payload(self, headers: Mapping[str, str], body: bytes) -> Any:
        """The body as handlers see it (``event.payload``); JSON by default."""
        try:
            return json.loads(body)
        except ValueError:
            return None

    def handshake(self, headers: Mapping[str, str], body: bytes) -> HandshakeResponse | None:
        return None

    def sign(self, body: bytes, *, secret: str, now: datetime) -> dict[str, str]:
        raise NotImplementedError

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        """A realistic test delivery, unsigned: extra headers and the body."""
        raise NotImplementedError


def require_header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if not value:
        raise MalformedRequest(f"missing header {name}", reason="missing_header")
    return value


def require_secrets(secrets: Sequence[str]) -> None:
    if not secrets:
        raise VerificationError("the endpoint has no active secret", reason="no_secret")


def any_digest_matches(expected: Sequence[bytes | str], received: Sequence[bytes | str]) -> bool:
    """Compare every pair in constant time, without stopping at the first match."""
    matched = False
    for want in expected:
        for got in received:
            a = want.encode() if isinstance(want, str) else want
            b = got.encode() if isinstance(got, str) else got
            matched |= hmac.compare_digest(a, b)
    return matched


def check_timestamp(timestamp: int, *, now: datetime, tolerance: timedelta) -> None:
    skew = now.timestamp() - timestamp
    if skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(skew)} s old (tolerance {int(tolerance.total_seconds())} s)",
            reason="stale_timestamp",
        )
    if -skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(-skew)} s in the future (tolerance "
            f"{int(tolerance.total_seconds())} s)",
            reason="future_timestamp",
        )


def json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise MalformedRequest("body is not valid JSON", reason="malformed_body") from None
    if not isinstance(payload, dict):
        raise MalformedRequest("body is not a JSON object", reason="malformed_body")
    return payload
