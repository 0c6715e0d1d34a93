"""Shopify: ``X-Shopify-Hmac-Sha256: <base64>``, HMAC-SHA256 of the body.

The key is the app's client secret. Deliveries of the newer "events" kind name their
headers in lower case without the ``X-`` (``shopify-hmac-sha256``, ``shopify-topic``,
...); both families are read. Nothing signs a time, so replays are stopped by the
dedupe key: ``X-Shopify-Event-Id`` (the same on every delivery of one event), else
``X-Shopify-Webhook-Id``. The type is ``X-Shopify-Topic``. Bodies must be JSON
(subscriptions in the XML format are refused as malformed).

Ordering key: ``{resource}/{id}``, the topic's resource and the body's ``id``
("orders/4501" for ``orders/create``, ``orders/paid`` and ``orders/delete`` of one order).
``admin_graphql_api_id`` would name the order the same way, but a ``*/delete`` body
carries only the ``id``. Position: the body's ``updated_at``, which a retry keeps, else
``X-Shopify-Triggered-At`` (the event's time).
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hooklatch.errors import MalformedRequest
from hooklatch.providers.base import Delivery, IncomingEvent, Provider
from hooklatch.providers.keys import KeyedEvent, dotted, key_text, position_of
from hooklatch.providers.parsing import json_object, occurred_at
from hooklatch.providers.signing import check_signatures, hmac_base64, hmac_sha256

SIGNATURE = "X-Shopify-Hmac-Sha256"


def _header(delivery: Delivery, name: str) -> str | None:
    """``X-Shopify-<name>``, else the newer ``shopify-<name>``."""
    return delivery.header(f"X-Shopify-{name}") or delivery.header(f"shopify-{name}")


class ShopifyProvider(Provider):
    name = "shopify"
    # Eight retries over four hours (since 2024-09); a day leaves room.
    retry_window = timedelta(days=1)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = _header(delivery, "Hmac-Sha256")
        if not signature:
            raise MalformedRequest(
                f"missing header {SIGNATURE} (or shopify-hmac-sha256)", reason="missing_header"
            )
        try:
            received = base64.b64decode(signature, validate=True)
        except (binascii.Error, ValueError):
            raise MalformedRequest(
                f"{SIGNATURE} must be base64", reason="malformed_header"
            ) from None
        check_signatures(
            [received], secrets=secrets, sign=lambda secret: hmac_sha256(secret, delivery.body)
        )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        json_object(delivery.body)  # refuses what is not a JSON object
        key = _header(delivery, "Event-Id") or _header(delivery, "Webhook-Id")
        topic = _header(delivery, "Topic")
        if not key or not topic:
            raise MalformedRequest(
                "a Shopify delivery needs X-Shopify-Topic and X-Shopify-Event-Id "
                "or X-Shopify-Webhook-Id",
                reason="missing_header",
            )
        triggered_at = occurred_at(_header(delivery, "Triggered-At"))
        # Only the body is signed: the id headers are not (id_signed stays False).
        return [IncomingEvent(external_id=key, type=topic, occurred_at=triggered_at)]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        resource, slash, _ = event.type.partition("/")  # the type is the topic
        resource_id = key_text(dotted(event.payload, "id"))
        if not resource or not slash or resource_id is None:
            return None
        return key_text(f"{resource}/{resource_id}")

    def ordering_position(self, event: KeyedEvent) -> int | None:
        updated_at = occurred_at(dotted(event.payload, "updated_at"))
        return position_of(updated_at or event.occurred_at)

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {SIGNATURE: hmac_base64(secret, delivery.body)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        payload = {
            "id": stamp,
            "admin_graphql_api_id": f"gid://shopify/Order/{stamp}",
            "name": "#1001",
            "email": "buyer@example.com",
            "currency": "EUR",
            "total_price": "20.00",
            "created_at": now.isoformat(),
        }
        headers = {
            "Content-Type": "application/json",
            "X-Shopify-Topic": "orders/create",
            "X-Shopify-Shop-Domain": "hooklatch-demo.myshopify.com",
            "X-Shopify-API-Version": "2025-01",
            "X-Shopify-Webhook-Id": str(uuid.uuid4()),
            "X-Shopify-Event-Id": str(uuid.uuid4()),
            "X-Shopify-Triggered-At": now.astimezone(UTC).isoformat().replace("+00:00", "Z"),
        }
        return headers, json.dumps(payload).encode()
