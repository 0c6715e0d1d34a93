"""The Redis Streams kind: each message added to a stream (XADD) as one entry whose fields
are the event's identity and its body; a call's messages go in one pipeline.

An entry's id is Redis's acknowledgement. Redis does not dedupe: a message sent again is a
second entry with the same ``key``, which a consumer dedupes by."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.typing import EncodableT, FieldT

from hooklatch.forwarding.kinds.base import Connection, Field, Outcome
from hooklatch.forwarding.kinds.checks import checked_url, settings_of, shown_url, split
from hooklatch.forwarding.kinds.failures import failed, os_reason
from hooklatch.forwarding.message import Message


class RedisStreamKind:
    name: ClassVar[str] = "redis"
    fields: ClassVar[Mapping[str, Field]] = {
        "url": Field(
            "the server's redis:// or rediss:// URL (it may carry a password)",
            required=True,
            secret=True,
        ),
        "stream": Field("the stream's key", required=True),
        "maxlen": Field("trim the stream to about this many entries (XADD MAXLEN ~)"),
    }

    def check(self, given: Mapping[str, str]) -> Connection:
        values = settings_of(self.name, self.fields, given)
        parts = checked_url(values["url"], schemes=("redis", "rediss"))
        if "maxlen" in values and not (values["maxlen"].isdigit() and int(values["maxlen"]) > 0):
            raise ValueError("maxlen should be a positive whole number")
        return split(self.fields, values, shown=shown_url(parts))

    def open(self, connection: Connection, *, timeout: float) -> RedisStreamPublisher:
        maxlen = connection.settings.get("maxlen")
        return RedisStreamPublisher(
            connection.secrets["url"],
            connection.settings["stream"],
            maxlen=int(maxlen) if maxlen else None,
            timeout=timeout,
        )


class RedisStreamPublisher:
    """A client with no retries of its own: a call fails at once when Redis is down, and
    the client's pool connects again on the next."""

    # A call is one pipeline: one round trip.
    at_once = 1000

    def __init__(self, url: str, stream: str, *, maxlen: int | None, timeout: float) -> None:
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
        )
        self._stream = stream
        self._maxlen = maxlen

    def publish(self, messages: Sequence[Message]) -> list[Outcome]:
        pipeline = self._client.pipeline(transaction=False)
        for message in messages:
            pipeline.xadd(self._stream, entry(message), maxlen=self._maxlen, approximate=True)
        try:
            results = pipeline.execute(raise_on_error=False)
        except redis.RedisError as error:
            return failed(len(messages), os_reason(error) or str(error))
        return [_outcome(result) for result in results]

    def close(self) -> None:
        self._client.close()


def entry(message: Message) -> dict[FieldT, EncodableT]:
    """A message as a stream entry's fields."""
    fields: dict[FieldT, EncodableT] = {
        "key": message.key,
        "event_id": message.event_id,
        "type": message.type,
        "provider": message.provider,
        "endpoint": message.endpoint_id,
        "received_at": message.received_at.isoformat(),
        "content_type": message.content_type,
        "body": message.body,
    }
    if message.ordering_key is not None:
        fields["ordering_key"] = message.ordering_key
    return fields


def _outcome(result: object) -> Outcome:
    """One XADD's outcome: the new entry's id, or the error Redis answered."""
    if isinstance(result, bytes | str) and result:
        return Outcome(delivered=True)
    return Outcome(delivered=False, error=str(result) or "no entry id")
