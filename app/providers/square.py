"""Square: ``x-square-hmacsha256-signature`` = base64 HMAC-SHA256(key, notification URL + body).

The notification URL is the one the subscription was made with, so it is the public URL
the request was sent to (``delivery.url``), never the address the request reached behind
a proxy. Square signs no timestamp; a retry repeats the body's ``event_id``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.parsing import id_and_type, json_object, occurred_at
from hooklatch.providers.signing import check_signatures, hmac_base64

SIGNATURE = "x-square-hmacsha256-signature"


def _signature(secret: str, url: str, body: bytes) -> str:
    return hmac_base64(secret, url.encode() + body)


class SquareProvider(Provider):
    name = "square"
    # Square retries failed deliveries for up to 72 hours.
    retry_window = timedelta(days=3)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        check_signatures(
            [require_header(delivery, SIGNATURE)],
            secrets=secrets,
            sign=lambda secret: _signature(secret, delivery.url, delivery.body),
            refusal="the signature matches no active signature key for this notification URL",
        )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event_id, event_type = id_and_type(payload, id_field="event_id", what="a Square event")
        # RFC 3339 with up to nanoseconds ("2022-07-13T20:30:59.037339943Z").
        when = occurred_at(payload.get("created_at"))
        return [IncomingEvent(event_id, event_type, when, id_signed=True)]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {SIGNATURE: _signature(secret, delivery.url, delivery.body)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "merchant_id": "MLDEMO000000",
            "type": "webhooks.test_notification",
            "event_id": str(uuid.uuid4()),
            "created_at": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "data": {"type": "webhooks", "id": str(uuid.uuid4())},
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()
