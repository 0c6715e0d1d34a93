"""Shopify through the conformance kit and the real endpoint.

Shopify publishes no signer (shopify-app-js signs in a test helper, and the Python
ShopifyAPI package has no webhook code): requests are signed with the standard
library, base64 HMAC-SHA256 of the body, as that helper does.
"""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

from hooklatch.providers.base import Delivery
from tests.conftest import make_endpoint
from tests.support.conformance import HttpConformance

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


class TestShopifyConformance(HttpConformance):
    provider = "shopify"
    secret = "shpss_conformance_old"
    other_secret = "shpss_conformance_new"
    signature_headers = ("X-Shopify-Hmac-Sha256",)
    event_id = "no-event-body"  # set by event_body: Shopify sends the id in a header

    def sign(self, body, *, secret, now, url):
        headers = classic_headers(body, secret, event_id=self.event_id)
        del headers["Content-Type"]
        return headers

    def event_body(self, event_id, *, note="hello"):
        self.event_id = event_id
        return order(note)


def post(client, endpoint, body, headers):
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def stored_event(runtime):
    with runtime.engine.connect() as c:
        return c.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()


def test_the_x_shopify_header_family_is_accepted(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post(client, endpoint, body, classic_headers(body, SECRET))
    assert response.status_code == 200, response.json
    row = stored_event(runtime)
    assert row[:2] == (EVENT_ID, "orders/create")
    assert row.occurred_at == datetime(2023, 3, 29, 18, 0, 27, 877041, tzinfo=UTC)


def test_the_lower_case_shopify_header_family_is_accepted(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post(client, endpoint, body, events_headers(body, SECRET))
    assert response.status_code == 200, response.json
    assert stored_event(runtime)[:2] == (EVENT_ID, "products/update")


def test_a_badly_signed_delivery_in_the_lower_case_family_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post(client, endpoint, body, events_headers(body, "shpss_someone_else"))
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")


def test_without_an_event_id_the_webhook_id_is_the_dedupe_key(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post(client, endpoint, body, classic_headers(body, SECRET, event_id=None))
    assert response.status_code == 200, response.json
    assert stored_event(runtime).external_id == WEBHOOK_ID


def test_a_second_delivery_of_one_event_is_a_duplicate(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    first = post(client, endpoint, body, classic_headers(body, SECRET))
    again = post(client, endpoint, body, classic_headers(body, SECRET, webhook_id="another"))
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")


def test_the_sample_event_signed_by_the_provider_is_accepted(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    provider, now = runtime.provider("shopify"), datetime.now(UTC)
    headers, body = provider.sample_event(now=now)
    headers.update(provider.sign(Delivery("POST", "", {}, body), secret=SECRET, now=now))
    response = post(client, endpoint, body, headers)
    assert response.status_code == 200, response.json
    assert response.json["status"] == "accepted"
