"""A hold window: keyed events wait, then each key runs in the provider's time order."""

from __future__ import annotations

import time

import pytest

from hooklatch.errors import BadRequest
from tests.support.database import count
from tests.support.pipeline import configure_ordering, drain, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_hold_window"


def held_endpoint(runtime, hold):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo", hold_seconds=hold)
    return endpoint


def send(client, endpoint, external_id, customer, created):
    body = stripe_event(external_id, event_type="order.step", customer=customer)
    body = body.replace(b'"created": ', f'"created": {created}, "x": '.encode(), 1)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json


def test_a_hold_window_runs_each_key_in_provider_time_order_after_the_window(
    client, runtime, router
):
    ran = []

    @router.on("stripe", "order.step")
    def record(event, ctx):
        ran.append((event.external_id, time.monotonic()))

    endpoint = held_endpoint(runtime, 1)
    now = int(runtime.clock().timestamp())
    sent_at = time.monotonic()
    send(client, endpoint, "evt_third", "cus_1", now - 1)
    send(client, endpoint, "evt_first", "cus_1", now - 30)
    send(client, endpoint, "evt_other", "cus_2", now - 20)
    send(client, endpoint, "evt_second", "cus_1", now - 10)
    # Held: no outbox row, nothing runs before the window has passed.
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    drain(runtime, timeout=10, until=lambda: len(ran) == 4)

    assert [name for name, _ in ran if name != "evt_other"] == [
        "evt_first",
        "evt_second",
        "evt_third",
    ]
    assert min(at for _, at in ran) - sent_at >= 1.0


def test_a_hold_window_needs_fifo(runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    with pytest.raises(BadRequest, match="fifo"):
        configure_ordering(runtime, endpoint, policy="serial", hold_seconds=5)


def test_unkeyed_events_of_a_held_endpoint_are_not_held(client, runtime, router):
    ran = []

    @router.on("stripe", "invoice.paid")
    def record(event, ctx):
        ran.append(event.external_id)

    endpoint = held_endpoint(runtime, 60)
    body = stripe_event("evt_unkeyed")  # no customer: keyed by the invoice id
    body = body.replace(b'"id": "in_123", ', b"", 1)  # no object id either: no key
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200
    drain(runtime, timeout=5, until=lambda: ran == ["evt_unkeyed"])  # not 60 s later
