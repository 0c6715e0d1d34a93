"""Stripe: ``Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...]``, HMAC-SHA256 over ``t.body``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

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
    require_header,
    require_secrets,
    timestamped_signatures,
    unix_time,
)


def _signature(secret: str, timestamp: int, body: bytes) -> str:
    # The key is the whole secret as UTF-8, "whsec_" prefix included.
    return hmac_hex(secret, str(timestamp).encode() + b"." + body)


class StripeProvider(Provider):
    name = "stripe"
    retry_window = timedelta(days=3)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        header = require_header(delivery, "Stripe-Signature")
        timestamp, signatures = timestamped_signatures(
            header, name="Stripe-Signature", separator=",", timestamp_key="t", signature_key="v1"
        )
        require_secrets(secrets)
        expected = [_signature(secret, timestamp, delivery.body) for secret in secrets]
        if not any_digest_matches(expected, signatures):
            raise VerificationError(
                "no v1 signature matches an active secret",
                facts={"scheme": f"t= and {len(signatures)} v1="},
            )
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, event_type = payload.get("id"), payload.get("type")
        if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
            raise MalformedRequest(
                "a Stripe event needs string id and type", reason="malformed_body"
            )
        occurred_at = unix_time(payload.get("created"))
        return [
            IncomingEvent(
                external_id=event_id, type=event_type, occurred_at=occurred_at, id_signed=True
            )
        ]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        """The customer the object belongs to (``cus_...``), else its subscription, else
        the object's own id: a customer's own events are keyed by its id, and a
        subscription's, invoices' and payments' by their customer's. The first of these
        the object has decides; one that is not an id gives no key. The position is the
        default, the event's ``created`` (whole seconds)."""
        subject = dotted(event.payload, "data.object")
        for field in ("customer", "subscription", "id"):
            value = dotted(subject, field)
            if value is not None:
                return key_text(value)
        return None

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = int(now.timestamp())
        signature = _signature(secret, timestamp, delivery.body)
        return {"Stripe-Signature": f"t={timestamp},v1={signature}"}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        payload = {
            "id": f"evt_demo_{stamp}",
            "object": "event",
            "type": "invoice.paid",
            "created": stamp,
            "livemode": False,
            "data": {
                "object": {"id": f"in_demo_{stamp}", "object": "invoice", "amount_paid": 2000}
            },
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()
