"""What a forward carries to its destination, on every kind: the event's body as the
provider sent it, and its identity as headers (or a stream's fields)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

# The names every kind uses, as HTTP headers and NATS and AMQP headers; a Redis stream's
# fields are short names of their own (hooklatch.forwarding.kinds.redis_streams).
KEY = "Hooklatch-Idempotency-Key"
EVENT_ID = "Hooklatch-Event-Id"
EVENT_TYPE = "Hooklatch-Event-Type"
PROVIDER = "Hooklatch-Provider"
ENDPOINT = "Hooklatch-Endpoint"
RECEIVED_AT = "Hooklatch-Received-At"
ORDERING_KEY = "Hooklatch-Ordering-Key"


@dataclass(frozen=True)
class Message:
    """One forward as it is sent: ``key`` is the event's idempotency key, the same as its
    handlers' ``ctx.idempotency_key`` and the same on every re-send; ``event_id`` is the
    provider's id for the event."""

    forward_id: int
    key: str
    event_id: str
    type: str
    provider: str
    endpoint_id: str
    received_at: datetime
    ordering_key: str | None
    body: bytes
    content_type: str

    def headers(self) -> dict[str, str]:
        """The event's identity, by name; the ordering key only where the event has one."""
        headers = {
            KEY: self.key,
            EVENT_ID: self.event_id,
            EVENT_TYPE: self.type,
            PROVIDER: self.provider,
            ENDPOINT: self.endpoint_id,
            RECEIVED_AT: self.received_at.isoformat(),
        }
        if self.ordering_key is not None:
            headers[ORDERING_KEY] = self.ordering_key
        return headers
