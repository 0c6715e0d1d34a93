"""The stale-event guard with Stripe, Paddle and Shopify events delivered in the wrong order:
the older state never overwrites the newer."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Column, MetaData, String, Table, select, text

from hooklatch.providers.base import Delivery
from tests.support.pipeline import configure_ordering, drain, make_endpoint

SECRET = "whsec_stale_guard_secret"
T0 = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)

states_metadata = MetaData()
states = Table(
    "test_states",
    states_metadata,
    Column("key", String(255), primary_key=True),
    Column("state", String(64), nullable=False),
)


@pytest.fixture
def state_table(runtime):
    states_metadata.drop_all(runtime.engine)
    states_metadata.create_all(runtime.engine)
    yield
    states_metadata.drop_all(runtime.engine)


def save_state(ctx, key, state):
    ctx.session.execute(states.delete().where(states.c.key == key))
    ctx.session.execute(states.insert().values(key=key, state=state))


def state_of(runtime, key):
    with runtime.engine.connect() as connection:
        return connection.execute(select(states.c.state).where(states.c.key == key)).scalar()


def deliver(client, runtime, endpoint, provider, body, headers):
    """POST a body signed as its provider signs it; returns the stored event id."""
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    lower = {k.lower(): v for k, v in headers.items()}
    delivery = Delivery(method="POST", url=url, headers=lower, body=body)
    signed = runtime.provider(provider).sign(delivery, secret=SECRET, now=runtime.clock())
    response = client.post(f"/hooks/{endpoint}", data=body, headers={**headers, **signed})
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


JSON = {"Content-Type": "application/json"}


def sender(client, runtime, provider):
    """An endpoint of ``provider``, and a function that delivers a body to it (JSON, unless
    other headers are given) signed as the provider signs it, returning the stored id."""
    endpoint, _ = make_endpoint(runtime, provider, secrets=[SECRET])

    def send(body, headers=JSON):
        return deliver(client, runtime, endpoint, provider, body, headers)

    return endpoint, send


def outcome(runtime, event_id):
    with runtime.engine.connect() as connection:
        status, last_error = connection.execute(
            text("SELECT status, last_error FROM events WHERE id = :i"), {"i": event_id}
        ).one()
        attempt = connection.execute(
            text("SELECT outcome, error FROM attempts WHERE event_id = :i ORDER BY id"),
            {"i": event_id},
        ).all()
    return status, last_error, [tuple(a) for a in attempt]


def stripe_subscription(event_type, status, created):
    return json.dumps(
        {
            "id": f"evt_{uuid.uuid4().hex[:24]}",
            "object": "event",
            "type": event_type,
            "created": int(created.timestamp()),
            "data": {
                "object": {
                    "id": "sub_1",
                    "object": "subscription",
                    "customer": "cus_1",
                    "status": status,
                }
            },
        }
    ).encode()


def test_stripe_created_arriving_after_updated_never_overwrites_it(
    client, runtime, router, state_table
):
    @router.on("stripe", "customer.subscription.*", skip_stale=True)
    def save_subscription(event, ctx):
        save_state(
            ctx, event.payload["data"]["object"]["id"], event.payload["data"]["object"]["status"]
        )

    _, send = sender(client, runtime, "stripe")
    updated = send(
        stripe_subscription("customer.subscription.updated", "active", T0 + timedelta(seconds=5))
    )
    drain(runtime)
    created = send(stripe_subscription("customer.subscription.created", "incomplete", T0))
    drain(runtime)

    assert state_of(runtime, "sub_1") == "active"
    assert outcome(runtime, updated)[0] == "processed"
    status, last_error, attempts = outcome(runtime, created)
    assert status == "ignored"
    assert last_error.startswith("stale: ")
    assert f"applied by event {updated}" in last_error
    assert attempts == [("stale", last_error)]


def test_stripe_events_of_the_same_second_are_not_stale(client, runtime, router, state_table):
    @router.on("stripe", "customer.subscription.*", skip_stale=True)
    def save_subscription(event, ctx):
        save_state(ctx, "sub_1", event.payload["data"]["object"]["status"])

    _, send = sender(client, runtime, "stripe")
    first = send(stripe_subscription("customer.subscription.updated", "trialing", T0))
    drain(runtime)
    second = send(stripe_subscription("customer.subscription.updated", "active", T0))
    drain(runtime)
    assert outcome(runtime, first)[0] == outcome(runtime, second)[0] == "processed"
    assert state_of(runtime, "sub_1") == "active"


def paddle_transaction(event_type, status, occurred):
    return json.dumps(
        {
            "event_id": f"evt_{uuid.uuid4().hex[:26]}",
            "event_type": event_type,
            "occurred_at": occurred.isoformat().replace("+00:00", "Z"),
            "notification_id": f"ntf_{uuid.uuid4().hex[:26]}",
            "data": {"id": "txn_1", "status": status, "currency_code": "EUR"},
        }
    ).encode()


def test_paddle_stale_transaction_updated_never_overwrites_completed_under_fifo(
    client, runtime, router, state_table
):
    @router.on("paddle", "transaction.*", skip_stale=True)
    def save_transaction(event, ctx):
        save_state(ctx, event.payload["data"]["id"], event.payload["data"]["status"])

    endpoint, send = sender(client, runtime, "paddle")
    configure_ordering(runtime, endpoint, policy="fifo")
    completed = send(
        paddle_transaction("transaction.completed", "completed", T0 + timedelta(microseconds=250))
    )
    late = send(paddle_transaction("transaction.updated", "paid", T0))
    drain(runtime)
    assert state_of(runtime, "txn_1") == "completed"
    assert outcome(runtime, completed)[0] == "processed"
    assert outcome(runtime, late)[0] == "ignored"
    with runtime.engine.connect() as connection:
        assert (
            connection.execute(
                text("SELECT ordering_key FROM events WHERE id = :i"), {"i": late}
            ).scalar()
            == "txn_1"
        )


def shopify_order(topic, financial_status, updated):
    body = json.dumps(
        {"id": 4501, "financial_status": financial_status, "updated_at": updated.isoformat()}
    ).encode()
    headers = {
        "Content-Type": "application/json",
        "X-Shopify-Topic": topic,
        "X-Shopify-Shop-Domain": "stale-guard.myshopify.com",
        "X-Shopify-Event-Id": str(uuid.uuid4()),
        "X-Shopify-Triggered-At": updated.isoformat().replace("+00:00", "Z"),
    }
    return body, headers


def test_shopify_orders_create_after_paid_is_seen_as_stale_from_inside_a_handler(
    client, runtime, router, state_table
):
    @router.on("shopify", "orders/*")
    def save_order(event, ctx):
        if ctx.is_stale():
            return
        save_state(ctx, str(event.payload["id"]), event.payload["financial_status"])

    _, send = sender(client, runtime, "shopify")
    paid = send(*shopify_order("orders/paid", "paid", T0 + timedelta(seconds=2)))
    drain(runtime)
    create = send(*shopify_order("orders/create", "pending", T0))
    drain(runtime)
    assert state_of(runtime, "4501") == "paid"
    assert outcome(runtime, paid)[0] == "processed"
    status, last_error, _ = outcome(runtime, create)
    assert status == "ignored" and "orders/4501" in last_error


def test_without_the_guard_the_older_state_would_win(client, runtime, router, state_table):
    """What the guard prevents: the same two Stripe events, a handler without it."""

    @router.on("stripe", "customer.subscription.*")
    def save_subscription(event, ctx):
        save_state(ctx, "sub_1", event.payload["data"]["object"]["status"])

    _, send = sender(client, runtime, "stripe")
    send(stripe_subscription("customer.subscription.updated", "active", T0 + timedelta(seconds=5)))
    drain(runtime)
    send(stripe_subscription("customer.subscription.created", "incomplete", T0))
    drain(runtime)
    assert state_of(runtime, "sub_1") == "incomplete"
