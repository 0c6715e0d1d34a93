"""Acme's webhooks, as a hooklatch provider plugin installed from its own package.

Acme signs ``"{X-Acme-Timestamp}.{raw body}"`` with HMAC-SHA256 and sends
``X-Acme-Signature: v1=<hex>[,v1=<hex>...]`` (one entry per active secret while a
secret is rolled). Each body is a JSON object with ``id``, ``kind`` and ``at``
(Unix seconds). Acme retries a failed delivery for 2 days.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from hooklatch.providers import (
    Delivery,
    IncomingEvent,
    MalformedRequest,
    Provider,
    check_signatures,
    check_timestamp,
    hmac_hex,
    id_and_type,
    json_object,
    require_header,
    unix_time,
    unix_timestamp,
)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac_hex(secret, b"%d." % timestamp + body)


class AcmeProvider(Provider):
    name = "acme"
    retry_window = timedelta(days=2)
    tolerance = timedelta(minutes=5)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        timestamp = unix_timestamp(require_header(delivery, "X-Acme-Timestamp"))
        header = require_header(delivery, "X-Acme-Signature")
        if timestamp is None:
            raise MalformedRequest("X-Acme-Timestamp is not a Unix time", reason="malformed_header")
        received = [part[3:] for part in header.split(",") if part.startswith("v1=")]
        if not received:
            raise MalformedRequest("X-Acme-Signature has no v1= entry", reason="malformed_header")
        # Every active secret against every v1= entry, in constant time: bad_signature if
        # none matches (while a secret is rolled, either verifies).
        check_signatures(
            received,
            secrets=secrets,
            sign=lambda secret: signature(secret, timestamp, delivery.body),
        )
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)  # malformed_body if it is not a JSON object
        event_id, kind = id_and_type(payload, type_field="kind", what="an Acme event")
        occurred_at = unix_time(payload.get("at"))  # None if absent or not a time
        # The id is read from the signed body: another body under it can only be Acme's.
        return [
            IncomingEvent(external_id=event_id, type=kind, occurred_at=occurred_at, id_signed=True)
        ]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = int(now.timestamp())
        return {
            "X-Acme-Timestamp": str(timestamp),
            "X-Acme-Signature": f"v1={signature(secret, timestamp, delivery.body)}",
        }

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        body = {"id": f"acme_{int(now.timestamp())}", "kind": "order.shipped", "at": 0}
        return {"Content-Type": "application/json"}, json.dumps(body).encode()
