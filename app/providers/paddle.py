"""Paddle Billing: ``Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>...]``, HMAC-SHA256 over
``{ts}:{raw body}`` keyed with the whole secret as UTF-8 (``pdl_ntfset_...`` prefix included).

Tolerance: Paddle's SDKs refuse a timestamp more than 5 seconds off. That leaves no room
for what separates Paddle's clock from ours in practice (drift on a VM between NTP syncs,
a request queued at a proxy, a slow worker), and each refusal costs a retry that comes back
minutes later. 5 minutes is what Stripe, Slack and Standard Webhooks allow. The window is
what a captured request could be replayed within, and a replay of one event is harmless
here: it carries the same ``event_id`` and is stored once.

Dedupe key: the body's ``event_id``. Each destination and each replay gets a new
``notification_id`` for the same ``event_id``.

Ordering key: the entity's id, ``data.id`` (``txn_...``, ``sub_...``). Its position is the
default, the body's ``occurred_at`` (microseconds), by which Paddle says to order events.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from hooklatch.providers.base import Delivery, IncomingEvent
from hooklatch.providers.keys import KeyedEvent, dotted, key_text
from hooklatch.providers.parsing import id_and_type, json_object, occurred_at
from hooklatch.providers.schemes import SchemeProvider, TimestampedHeader


class PaddleProvider(SchemeProvider):
    name = "paddle"
    # Live accounts: up to 60 attempts over 3 days; sandbox: 3 within 15 minutes. Later
    # deliveries are manual replays (same event_id), covered by the dedupe retention.
    retry_window = timedelta(days=3)
    tolerance = timedelta(minutes=5)
    scheme = TimestampedHeader(
        "Paddle-Signature", separator=";", timestamp_key="ts", signature_key="h1", joiner=b":"
    )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, event_type = id_and_type(
            payload, id_field="event_id", type_field="event_type", what="a Paddle event"
        )
        when = occurred_at(payload.get("occurred_at"))
        return [IncomingEvent(event_id, event_type, when, id_signed=True)]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        return key_text(dotted(event.payload, "data.id"))

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "event_id": f"evt_{uuid.uuid4().hex[:26]}",
            "event_type": "transaction.completed",
            "occurred_at": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "notification_id": f"ntf_{uuid.uuid4().hex[:26]}",
            "data": {
                "id": f"txn_{uuid.uuid4().hex[:26]}",
                "status": "completed",
                "currency_code": "EUR",
                "details": {"totals": {"grand_total": "2000"}},
            },
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()
