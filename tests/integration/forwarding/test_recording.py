"""Forwards are written in the transaction that processes their events: one per event
and destination whose filter matches, once the handlers succeeded or none matched; never
for an event that failed, is dead or was stale; and retention keeps what they need."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import text

from hooklatch.operations.retention import Retention
from hooklatch.services.replays import replay_event
from tests.support.database import count, load_event
from tests.support.forwarding import REDIS_URL, add_destination, unique
from tests.support.pipeline import deliver, drain, make_endpoint


def redis_destination(runtime, **selects):
    return add_destination(
        runtime, "redis", {"url": REDIS_URL, "stream": unique("hooklatch-test-")}, **selects
    )


def forwarded(runtime):
    """(event id, destination id) of every forward."""
    with runtime.session_factory() as session:
        return set(
            tuple(row)
            for row in session.execute(text("SELECT event_id, destination_id FROM forwards"))
        )


def test_each_processed_event_goes_to_every_destination_its_filter_matches(client, runtime, router):
    router.on("stripe", "*")(lambda event, ctx: None)
    first, _ = make_endpoint(runtime)
    second, _ = make_endpoint(runtime)
    everything = redis_destination(runtime)
    of_first = redis_destination(runtime, endpoint=first)
    customers = redis_destination(runtime, types=("customer.*",))
    of_github = redis_destination(runtime, provider="github")
    invoice = deliver(client, first, "evt_invoice", "invoice.paid")
    customer = deliver(client, second, "evt_customer", "customer.created")
    drain(runtime)
    assert forwarded(runtime) == {
        (invoice, everything),
        (invoice, of_first),
        (customer, everything),
        (customer, customers),
    }
    assert of_github not in {destination for _, destination in forwarded(runtime)}


def test_an_event_no_handler_wants_is_forwarded_too(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    destination = redis_destination(runtime)
    event_id = deliver(client, endpoint, "evt_unhandled", "charge.refunded")
    drain(runtime)
    assert load_event(runtime, event_id).status == "ignored"
    assert forwarded(runtime) == {(event_id, destination)}


def test_a_failing_event_is_forwarded_only_once_a_replay_of_it_succeeds_and_only_once(
    client, runtime, router
):
    runtime.settings = replace(runtime.settings, max_attempts=2)
    healthy = {"value": False}

    @router.on("stripe", "invoice.paid")
    def flaky(event, ctx):
        if not healthy["value"]:
            raise RuntimeError("not yet")

    endpoint, _ = make_endpoint(runtime)
    destination = redis_destination(runtime)
    event_id = deliver(client, endpoint, "evt_flaky")
    drain(runtime)
    assert load_event(runtime, event_id).status == "dead"
    assert forwarded(runtime) == set()
    healthy["value"] = True
    replay_event(runtime, event_id, actor="test", reason="fixed")
    drain(runtime)
    assert load_event(runtime, event_id).status == "processed"
    assert forwarded(runtime) == {(event_id, destination)}
    replay_event(runtime, event_id, actor="test", reason="again")
    drain(runtime)
    assert count(runtime, "SELECT count(*) FROM forwards") == 1


def test_a_destination_added_later_gets_only_the_events_processed_after_it(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    before = deliver(client, endpoint, "evt_before")
    drain(runtime)
    destination = redis_destination(runtime)
    after = deliver(client, endpoint, "evt_after")
    drain(runtime)
    assert forwarded(runtime) == {(after, destination)}
    assert before != after


def test_retention_keeps_an_event_while_its_forward_waits_and_its_body_while_one_is_dead(
    client, runtime
):
    endpoint, _ = make_endpoint(runtime)
    redis_destination(runtime)
    ids = [deliver(client, endpoint, f"evt_kept_{n}") for n in range(3)]
    drain(runtime)
    waiting, dead, delivered = ids
    with runtime.session_factory.begin() as session:
        session.execute(
            text("UPDATE forwards SET status = 'dead' WHERE event_id = :e"), {"e": dead}
        )
        session.execute(
            text("UPDATE forwards SET status = 'delivered' WHERE event_id = :e"), {"e": delivered}
        )
    retention = Retention(runtime)
    received = runtime.clock()
    # Past the payloads' clock (7 days), within the dedupe keys' (30 days).
    runtime.clock = lambda: received + timedelta(days=10)
    retention.once()
    assert load_event(runtime, waiting).body is not None
    assert load_event(runtime, dead).body is not None
    assert load_event(runtime, delivered).body is None
    # Past both: the dead forward's event goes, as a dead event does; the waiting stays.
    runtime.clock = lambda: received + timedelta(days=40)
    retention.once()
    assert load_event(runtime, waiting).body is not None
    gone = "SELECT count(*) FROM events WHERE id IN (:dead, :delivered)"
    assert count(runtime, gone, dead=dead, delivered=delivered) == 0
