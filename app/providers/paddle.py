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
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import (
    Delivery,
    IncomingEvent,
    KeyedEvent,
    Provider,
    any_digest_matches,
    check_timestamp,
    dotted,
    hmac_hex,
    json_object,
    key_text,
    occurred_at,
    require_header,
    require_secrets,
    timestamped_signatures,
)


def _signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac_hex(secret, str(timestamp).encode() + b":" + body)


class PaddleProvider(Provider):
    name = "paddle"
    # Live accounts: up to 60 attempts over 3 days; sandbox: 3 within 15 minutes. Later
    # deliveries are manual replays (same event_id), covered by the dedupe retention.
    retry_window = timedelta(days=3)
    tolerance = timedelta(minutes=5)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        header = require_header(delivery, "Paddle-Signature")
        timestamp, signatures = timestamped_signatures(
            header, name="Paddle-Signature", separator=";", timestamp_key="ts", signature_key="h1"
        )
        require_secrets(secrets)
        expected = [_signature(secret, timestamp, delivery.body) for secret in secrets]
        if not any_digest_matches(expected, signatures):
            raise VerificationError("no h1 signature matches an active secret")
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, event_type = payload.get("event_id"), payload.get("event_type")
        if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
            raise MalformedRequest(
                "a Paddle event needs string event_id and event_type", reason="malformed_body"
            )
        return [
            IncomingEvent(
                external_id=event_id,
                type=event_type,
                occurred_at=occurred_at(payload.get("occurred_at")),
                id_signed=True,
            )
        ]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        return key_text(dotted(event.payload, "data.id"))

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = int(now.timestamp())
        signature = _signature(secret, timestamp, delivery.body)
        return {"Paddle-Signature": f"ts={timestamp};h1={signature}"}

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
