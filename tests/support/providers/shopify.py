"""How Shopify signs a test request, for the conformance kit and the tests.

Shopify publishes no signer (shopify-app-js signs in a test helper, and the Python
ShopifyAPI package has no webhook code): requests are signed with the standard
library, base64 HMAC-SHA256 of the body, as that helper does. Both header families
Shopify sends are built here.
"""

import base64
import hashlib
import hmac
import json

from hooklatch.testing import ProviderConformance
from tests.support.providers import without_content_type

SECRET = "shpss_conformance_client_secret"
EVENT_ID = "98880550-7158-44d4-b7cd-2c97c8a091b5"
WEBHOOK_ID = "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"
TRIGGERED_AT = "2023-03-29T18:00:27.877041743Z"


def hmac_b64(secret: str, body: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), body, hashlib.sha256).digest()).decode()


def classic_headers(body: bytes, secret: str, *, event_id=EVENT_ID, webhook_id=WEBHOOK_ID):
    """The X-Shopify-* family that webhook subscriptions send."""
    headers = {
        "Content-Type": "application/json",
        "X-Shopify-Hmac-Sha256": hmac_b64(secret, body),
        "X-Shopify-Topic": "orders/create",
        "X-Shopify-Shop-Domain": "example.myshopify.com",
        "X-Shopify-API-Version": "2025-01",
        "X-Shopify-Webhook-Id": webhook_id,
        "X-Shopify-Triggered-At": TRIGGERED_AT,
    }
    if event_id is not None:
        headers["X-Shopify-Event-Id"] = event_id
    return headers


def events_headers(body: bytes, secret: str, *, event_id=EVENT_ID):
    """The lower-case, unprefixed family of the newer "events" deliveries."""
    return {
        "Content-Type": "application/json",
        "shopify-hmac-sha256": hmac_b64(secret, body),
        "shopify-topic": "products/update",
        "shopify-shop-domain": "example.myshopify.com",
        "shopify-api-version": "2025-07",
        "shopify-event-id": event_id,
        "shopify-webhook-id": WEBHOOK_ID,
        "shopify-triggered-at": TRIGGERED_AT,
    }


def order(note: str = "hello") -> bytes:
    payload = {"id": 820982911946154508, "name": "#9999", "note": note, "total_price": "403.00"}
    return json.dumps(payload, ensure_ascii=False).encode()


class ShopifyCase(ProviderConformance):
    provider = "shopify"
    secret, other_secret = "shpss_conformance_old", "shpss_conformance_new"
    signature_headers = ("X-Shopify-Hmac-Sha256",)
    event_id = "no-event-body"  # set by event_body: Shopify sends the id in a header

    def sign(self, body, *, secret, now, url):
        return without_content_type(classic_headers(body, secret, event_id=self.event_id))

    def event_body(self, event_id, *, note="hello"):
        self.event_id = event_id
        return order(note)
