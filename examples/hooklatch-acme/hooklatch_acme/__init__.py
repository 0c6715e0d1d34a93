"""Acme's webhooks, as a hooklatch provider plugin installed from its own package.

Acme signs ``"{X-Acme-Timestamp}.{raw body}"`` with HMAC-SHA256 and sends
``X-Acme-Signature: v1=<hex>[,v1=<hex>...]`` (one entry per active secret while a
secret is rolled). Each body is a JSON object with ``id``, ``kind`` and ``at``
(Unix seconds). Acme retries a failed delivery for 2 days.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hooklatch.providers import (
    Delivery,
    IncomingEvent,
    MalformedRequest,
    Provider,
    VerificationError,
    any_digest_matches,
    check_timestamp,
    hmac_hex,
    json_object,
    require_header,
    require_secrets,
)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    return hmac_hex(secret, b"%d." % timestamp + body)


class AcmeProvider(Provider):
    name = "acme"
    retry_window = timedelta(days=2)
    tolerance = timedelta(minutes=5)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        raw_timestamp = require_header(delivery, "X-Acme-Timestamp")
        header = require_header(delivery, "X-Acme-Signature")
        try:
            timestamp = int(raw_timestamp)
        except ValueError:
            raise MalformedRequest(
                "X-Acme-Timestamp is not a Unix time", reason="malformed_header"
            ) from None
        received = [part[3:] for part in header.split(",") if part.startswith("v1=")]
        if not received:
            raise MalformedRequest("X-Acme-Signature has no v1= entry", reason="malformed_header")
        require_secrets(secrets)
        expected = [signature(secret, timestamp, delivery.body) for secret in secrets]
        if not any_digest_matches(expected, received):
            raise VerificationError("no signature matches an active secret")
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, kind, at = payload.get("id"), payload.get("kind"), payload.get("at")
        if not isinstance(event_id, str) or not event_id or not isinstance(kind, str):
            raise MalformedRequest(
                "an Acme event needs string id and kind", reason="malformed_body"
            )
        occurred = datetime.fromtimestamp(at, UTC) if isinstance(at, int) else None
        # The id is read from the signed body: another body under it can only be Acme's.
        return [
            IncomingEvent(external_id=event_id, type=kind, occurred_at=occurred, id_signed=True)
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
