"""Forwarding's messages as the tests send them."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

from hooklatch.forwarding.message import Message


def message(
    number: int = 1, *, ordering_key: str | None = None, body: bytes | None = None
) -> Message:
    """A forward of a Stripe event, its key unique to this call."""
    event_id = f"evt_{uuid.uuid4().hex[:16]}"
    return Message(
        forward_id=number,
        key=f"stripe:{event_id}",
        event_id=event_id,
        type="invoice.paid",
        provider="stripe",
        endpoint_id="ep_billing",
        received_at=datetime(2026, 3, 1, 12, 0, number, tzinfo=UTC),
        ordering_key=ordering_key,
        body=json.dumps({"id": event_id, "n": number}).encode() if body is None else body,
        content_type="application/json",
    )
