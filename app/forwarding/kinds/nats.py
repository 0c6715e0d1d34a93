"""The NATS kind: each message published to a JetStream subject and acknowledged by the
stream that stores it, ``Nats-Msg-Id`` set to the event's idempotency key, so the stream
keeps one copy of a re-sent message within its duplicate window.

A subject no stream takes fails (no acknowledgement comes); with ``stream`` set, a subject
that another stream takes fails too."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import ClassVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from hooklatch.forwarding.kinds.base import Connection, Field, Outcome
from hooklatch.forwarding.kinds.checks import checked_url, settings_of, shown_url, split
from hooklatch.forwarding.kinds.failures import failed, os_reason
from hooklatch.forwarding.message import Message

# A published subject is literal: dot-separated tokens, no wildcard, no white space.
SUBJECT = re.compile(r"[^.*>\s]+(\.[^.*>\s]+)*")
STREAM = re.compile(r"[^.*>\s/\\]+")


class NatsKind:
    name: ClassVar[str] = "nats"
    fields: ClassVar[Mapping[str, Field]] = {
        "url": Field(
            "the server's nats:// or tls:// URL (it may carry a user and password, or a token)",
            required=True,
            secret=True,
        ),
        "subject": Field("the subject each message is published to (no wildcards)", required=True),
        "stream": Field("the stream expected to take the subject; another's refuses it"),
    }

    def check(self, given: Mapping[str, str]) -> Connection:
        values = settings_of(self.name, self.fields, given)
        parts = checked_url(values["url"], schemes=("nats", "tls"))
        if not SUBJECT.fullmatch(values["subject"]):
            raise ValueError(
                "subject should be dot-separated names, without spaces or the wildcards * and >"
            )
        if "stream" in values and not STREAM.fullmatch(values["stream"]):
            raise ValueError("stream should be a name without spaces, dots, *, >, / or \\")
        return split(self.fields, values, shown=shown_url(parts))

    def open(self, connection: Connection, *, timeout: float) -> NatsPublisher:
        return NatsPublisher(
            connection.secrets["url"],
            connection.settings["subject"],
            stream=connection.settings.get("stream"),
            timeout=timeout,
        )


class NatsPublisher:
    """Runs nats-py on an event loop of its own, from the calling thread only. Connects on
    the first call, publishes a call's messages at once, and after the connection fails
    connects again on the next call."""

    # A call's messages are published together and acknowledged within one timeout.
    at_once = 1000

    def __init__(self, url: str, subject: str, *, stream: str | None, timeout: float) -> None:
        self._url = url
        self._subject = subject
        self._stream = stream
        self._timeout = timeout
        self._loop = asyncio.new_event_loop()
        self._client: Client | None = None
        self._noted: Exception | None = None  # the client's last error, told to error_cb

    def publish(self, messages: Sequence[Message]) -> list[Outcome]:
        return self._loop.run_until_complete(self._publish(messages))

    def close(self) -> None:
        self._loop.run_until_complete(self._drop())
        self._loop.close()

    async def _publish(self, messages: Sequence[Message]) -> list[Outcome]:
        try:
            js = await self._jetstream()
        except (TimeoutError, OSError, nats.errors.Error) as error:
            await self._drop()
            return failed(len(messages), self._connect_reason(error))
        outcomes = await asyncio.gather(*(self._send(js, message) for message in messages))
        if self._client is not None and not self._client.is_connected:
            await self._drop()
        return outcomes

    async def _jetstream(self) -> JetStreamContext:
        if self._client is None:
            self._noted = None
            client = self._client = Client()
            # Two attempts without a pause, then NoServersError: a server that is down
            # fails the call at once instead of being retried in the background.
            await client.connect(
                self._url,
                connect_timeout=max(1, round(self._timeout)),
                allow_reconnect=False,
                max_reconnect_attempts=1,
                reconnect_time_wait=0,
                error_cb=self._note,
            )
        return self._client.jetstream()

    async def _send(self, js: JetStreamContext, message: Message) -> Outcome:
        headers = {
            **message.headers(),
            "Nats-Msg-Id": message.key,
            "Content-Type": message.content_type,
        }
        try:
            ack = await js.publish(
                self._subject,
                message.body,
                timeout=self._timeout,
                stream=self._stream,
                headers=headers,
            )
        except (TimeoutError, OSError, nats.errors.Error) as error:
            return Outcome(delivered=False, error=self._publish_reason(error))
        return Outcome(delivered=True, duplicate=bool(ack.duplicate))

    async def _note(self, error: Exception) -> None:
        """The client's error callback: keeps the error, which says why a connection
        failed better than the NoServersError that connect raises after it."""
        self._noted = error

    async def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None and not client.is_closed:
            await client.close()

    def _connect_reason(self, error: BaseException) -> str:
        cause = self._noted or error
        if isinstance(cause, TimeoutError):
            return f"cannot connect: no answer within {self._timeout:g} s"
        return f"cannot connect: {os_reason(cause) or cause}"

    def _publish_reason(self, error: BaseException) -> str:
        if isinstance(error, nats.js.errors.NoStreamResponseError):
            return f"no stream takes subject {self._subject}"
        if isinstance(error, nats.js.errors.APIError) and error.description:
            return f"refused by the stream: {error.description}"
        if isinstance(error, TimeoutError):
            return f"no acknowledgement within {self._timeout:g} s"
        return os_reason(error) or str(error) or type(error).__name__
