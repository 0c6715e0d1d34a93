"""Every kind end to end, against the broker on this machine or a real HTTP receiver
(another hooklatch, verifying the Standard Webhooks signature): 1,000 events delivered
over the ingest route, processed, forwarded by a relay's forwarder; each arrives with its
key and its body as the provider sent it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from sqlalchemy import text

from tests.support.database import count
from tests.support.forwarding import (
    add_destination,
    forward_all,
    jetstream,
    keys_of,
    rabbit_queue,
    redis_stream,
    signing_secret,
)
from tests.support.live_app import served
from tests.support.pipeline import deliver, drain, make_endpoint

EVENTS = 1000


def delivered_and_processed(client, runtime, endpoint):
    """EVENTS Stripe-signed events through the ingest route, their handlers run."""
    for n in range(EVENTS):
        deliver(client, endpoint, f"evt_{n:05d}", "invoice.paid")
    drain(runtime, timeout=120)
    return keys_of(runtime, endpoint)


def bodies_by_key(runtime, endpoint):
    with runtime.session_factory() as session:
        rows = session.execute(
            text("SELECT external_id, body FROM events WHERE endpoint_id = :e"), {"e": endpoint}
        )
        return {f"hooklatch:{endpoint}:{external_id}": bytes(body) for external_id, body in rows}


BROKERS: dict[str, Callable[[], AbstractContextManager[Any]]] = {
    "nats": jetstream,
    "rabbitmq": rabbit_queue,
    "redis": redis_stream,
}


@pytest.mark.parametrize("kind", sorted(BROKERS))
def test_a_thousand_events_reach_the_broker_each_with_its_key(client, runtime, kind):
    endpoint, _ = make_endpoint(runtime)
    with BROKERS[kind]() as (given, read):
        add_destination(runtime, kind, given, endpoint=endpoint)
        keys = delivered_and_processed(client, runtime, endpoint)
        forward_all(runtime, EVENTS)
        received = read()
    assert set(received.keys) == keys
    # Nothing was killed or cut: one message per event, on every kind.
    assert received.repeats() == 0
    assert len(received.messages) == EVENTS
    bodies = bodies_by_key(runtime, endpoint)
    assert all(body == bodies[key] for key, body in received.messages)
    assert count(runtime, "SELECT count(*) FROM forwards WHERE status = 'delivered'") == EVENTS


def test_jetstream_holds_one_message_per_event_when_forwards_are_sent_again(client, runtime):
    """Every forward replayed after delivery: the stream's dedupe window drops each repeat
    by its Nats-Msg-Id, which is the key."""
    from hooklatch.forwarding.destinations import ReplaySet
    from hooklatch.services.forwarding import replay_forwards

    endpoint, _ = make_endpoint(runtime)
    with jetstream() as (given, read):
        destination = add_destination(runtime, "nats", given, endpoint=endpoint)
        delivered_and_processed(client, runtime, endpoint)
        forward_all(runtime, EVENTS)
        again = replay_forwards(
            runtime,
            destination,
            ReplaySet(statuses=("delivered",)),
            dry_run=False,
            actor="test",
            reason="send everything again",
        )
        assert again["replayed"] == EVENTS
        forward_all(runtime, EVENTS)
        received = read()
    assert len(received.messages) == EVENTS
    assert received.repeats() == 0


class Counting:
    """WSGI middleware noting each request's webhook-id and the answer's status."""

    def __init__(self, app):
        self.app = app
        self.seen: list[tuple[str, int]] = []

    def __call__(self, environ, start_response):
        key = environ.get("HTTP_WEBHOOK_ID", "")

        def noting(status, headers, *rest):
            self.seen.append((key, int(status.split()[0])))
            return start_response(status, headers, *rest)

        return self.app(environ, noting)


@contextmanager
def hooklatch_receiver(app_with, secret):
    """Another hooklatch on the same database, serving an endpoint of the Standard
    Webhooks provider whose secret is the destination's signing secret."""
    receiver = app_with()
    counting = Counting(receiver.wsgi_app)
    receiver.wsgi_app = counting
    runtime = receiver.extensions["hooklatch"]
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    with served(receiver) as base:
        yield f"{base}/hooks/{endpoint}", endpoint, counting


def test_a_thousand_events_reach_another_hooklatch_which_verifies_each(client, runtime, app_with):
    endpoint, _ = make_endpoint(runtime)
    secret = signing_secret()
    with hooklatch_receiver(app_with, secret) as (url, receiving, counting):
        add_destination(runtime, "http", {"url": url, "signing_secret": secret}, endpoint=endpoint)
        keys = delivered_and_processed(client, runtime, endpoint)
        forward_all(runtime, EVENTS)
    answered = Counter(status for _, status in counting.seen)
    assert answered == {200: EVENTS}
    # The receiver stored each as an event of its own, under its webhook-id: the key.
    with runtime.session_factory() as session:
        rows = session.execute(
            text("SELECT external_id, body FROM events WHERE endpoint_id = :e"),
            {"e": receiving},
        )
        stored = {external_id: body for external_id, body in rows}
    assert set(stored) == keys
    bodies = bodies_by_key(runtime, endpoint)
    assert all(bytes(stored[key]) == bodies[key] for key in keys)
    assert json.loads(bytes(stored[min(keys)]))["type"] == "invoice.paid"
