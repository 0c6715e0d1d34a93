"""Shopify through the real endpoint: both header families, the dedupe key when there is
no event id, duplicates, and the provider's own sample event."""

from datetime import UTC, datetime

from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.shopify import (
    EVENT_ID,
    SECRET,
    WEBHOOK_ID,
    classic_headers,
    events_headers,
    order,
)


def stored_event(runtime):
    with runtime.engine.connect() as c:
        return c.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()


def test_the_x_shopify_header_family_is_accepted(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post_json(client, endpoint, body, classic_headers(body, SECRET))
    assert response.status_code == 200, response.json
    row = stored_event(runtime)
    assert row[:2] == (EVENT_ID, "orders/create")
    assert row.occurred_at == datetime(2023, 3, 29, 18, 0, 27, 877041, tzinfo=UTC)


def test_the_lower_case_shopify_header_family_is_accepted(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post_json(client, endpoint, body, events_headers(body, SECRET))
    assert response.status_code == 200, response.json
    assert stored_event(runtime)[:2] == (EVENT_ID, "products/update")


def test_a_badly_signed_delivery_in_the_lower_case_family_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post_json(client, endpoint, body, events_headers(body, "shpss_someone_else"))
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")


def test_without_an_event_id_the_webhook_id_is_the_dedupe_key(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    response = post_json(client, endpoint, body, classic_headers(body, SECRET, event_id=None))
    assert response.status_code == 200, response.json
    assert stored_event(runtime).external_id == WEBHOOK_ID


def test_a_second_delivery_of_one_event_is_a_duplicate(client, runtime):
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order()
    first = post_json(client, endpoint, body, classic_headers(body, SECRET))
    again = post_json(client, endpoint, body, classic_headers(body, SECRET, webhook_id="another"))
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")
