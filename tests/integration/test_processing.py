"""Workers: handlers run once, commit with the event, retry with backoff, die, and replay."""

import itertools
from datetime import timedelta

from sqlalchemy import select

from hooklatch.events.models import Attempt, Event
from tests.support.database import count, load_event
from tests.support.effects import effect_rows
from tests.support.handlers import write_effect
from tests.support.pipeline import dead_then_fixed, deliver, drain, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def test_handler_effect_commits_with_the_event_and_gets_a_stable_idempotency_key(
    client, runtime, router
):
    seen = []
    router.on("stripe", "invoice.paid")(write_effect)
    router.on("stripe", "invoice.*")(
        lambda e, ctx: seen.append((e.type, e.payload["id"], ctx.is_replay))
    )
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_paid")
    drain(runtime)
    assert load_event(runtime, event_id).status == "processed"
    [row] = effect_rows(runtime, "evt_paid")
    assert row.idempotency_key == f"hooklatch:{endpoint}:evt_paid"
    assert (row.attempt, row.is_replay) == (1, False)
    assert seen == [("invoice.paid", "evt_paid", False)]


def test_event_without_a_handler_is_marked_ignored_visibly(client, runtime):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_nobody", event_type="customer.created")
    drain(runtime)
    stored = load_event(runtime, event_id)
    assert stored.status == "ignored"
    assert count(runtime, "SELECT count(*) FROM attempts WHERE outcome = 'ignored'") == 1


def test_failing_handler_writes_nothing_is_retried_with_backoff_then_dead(client, runtime, router):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, max_attempts=4)

    @router.on("stripe", "invoice.paid")
    def fails(event, ctx):
        write_effect(event, ctx)
        raise RuntimeError("downstream said no")

    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_fails")
    drain(runtime)

    stored = load_event(runtime, event_id)
    assert stored.status == "dead"
    assert stored.attempts == 4
    assert "downstream said no" in stored.last_error
    assert effect_rows(runtime, "evt_fails") == []  # every attempt's writes rolled back
    with runtime.session_factory() as session:
        attempts = session.scalars(
            select(Attempt).where(Attempt.event_id == event_id).order_by(Attempt.id)
        ).all()
    assert [a.number for a in attempts] == [1, 2, 3, 4]
    assert all(a.outcome == "failed" for a in attempts)
    gaps = [(b.started_at - a.finished_at) for a, b in itertools.pairwise(attempts)]
    # base 0.05 s, cap 0.2 s: each wait is at least half of base * 2^(n-1).
    assert all(gap >= timedelta(seconds=0.025 * 2**i) for i, gap in enumerate(gaps))


def test_provider_redelivery_of_a_dead_event_rearms_it(client, runtime, router):
    endpoint, event_id = dead_then_fixed(client, runtime, router, "evt_rearm")
    body = stripe_event("evt_rearm")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200
    assert response.json["status"] == "duplicate"
    assert response.json["events"][0]["rearmed"] is True
    drain(runtime)
    assert load_event(runtime, event_id).status == "processed"
    assert len(effect_rows(runtime, "evt_rearm")) == 1


def test_a_duplicate_job_for_a_processed_event_does_nothing(client, runtime, router):
    router.on("stripe", "invoice.paid")(write_effect)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_twice")
    drain(runtime)
    with runtime.session_factory.begin() as session:
        assert process_one(session, runtime, event_id) == "skipped"
    assert len(effect_rows(runtime, "evt_twice")) == 1


def test_an_event_locked_by_another_worker_is_skipped_not_run_twice(client, runtime, router):
    router.on("stripe", "invoice.paid")(write_effect)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_locked")
    with runtime.session_factory.begin() as holder:
        holder.scalars(select(Event).where(Event.id == event_id).with_for_update()).one()
        with runtime.session_factory.begin() as other:
            assert process_one(other, runtime, event_id) == "skipped"
    assert effect_rows(runtime, "evt_locked") == []


def process_one(session, runtime, event_id) -> str:
    """What a worker's chunk makes of one event, in the caller's transaction."""
    from hooklatch.workers.worker.processing import process_chunk

    [outcome] = process_chunk(session, runtime, [event_id]).outcomes
    return outcome


def failing_one(client, runtime, router, prefix, n, error, failing=3):
    """``n`` events delivered, ``prefix`` and their number their ids, whose handler writes
    an effect and then, for the one numbered ``failing``, raises ``error``: their ids."""

    def fail_on_one(event, ctx):
        write_effect(event, ctx)
        if event.external_id == f"{prefix}{failing}":
            raise error

    router.on("stripe", "invoice.paid")(fail_on_one)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    return [deliver(client, endpoint, f"{prefix}{k}") for k in range(n)]


def test_in_a_shared_transaction_one_failing_event_undoes_only_its_own_writes(
    client, runtime, router
):
    ids = failing_one(client, runtime, router, "evt_batch_", 6, RuntimeError("this one fails"))
    from hooklatch.workers.worker.jobs import process_events

    counts = process_events(runtime, ids)
    assert counts == {"processed": 5, "pending": 1}
    assert [len(effect_rows(runtime, f"evt_batch_{n}")) for n in range(6)] == [1, 1, 1, 0, 1, 1]
    failed = load_event(runtime, ids[3])
    assert (failed.status, failed.attempts) == ("pending", 1)
    assert count(runtime, "SELECT count(*) FROM attempts") == 6


def test_a_job_commits_in_several_transactions_and_still_runs_every_event_once(
    client, runtime, router, monkeypatch
):
    from hooklatch.workers.worker import jobs, processing

    # Every event past the first in a transaction is over the time budget.
    monkeypatch.setattr(processing, "TRANSACTION_SECONDS", 0.0)
    transactions: list[list[int]] = []
    monkeypatch.setattr(jobs, "process_chunk", _counting(processing.process_chunk, transactions))
    router.on("stripe", "invoice.paid")(write_effect)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(5):
        deliver(client, endpoint, f"evt_split_{n}")
    drain(runtime)
    assert len(transactions) == 5
    assert [len(effect_rows(runtime, f"evt_split_{n}")) for n in range(5)] == [1] * 5
    assert count(runtime, "SELECT count(*) FROM attempts") == 5
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


def _counting(function, calls):
    def wrapper(*args, **kwargs):
        calls.append(args[2])
        return function(*args, **kwargs)

    return wrapper


def test_an_error_text_the_database_cannot_store_costs_only_its_own_event(client, runtime, router):
    error = ValueError("bad name from the payload: a\x00b")
    ids = failing_one(client, runtime, router, "evt_nul_", 4, error, failing=2)
    from hooklatch.workers.worker.jobs import process_events

    assert process_events(runtime, ids) == {"processed": 3, "pending": 1}
    assert [len(effect_rows(runtime, f"evt_nul_{n}")) for n in range(4)] == [1, 1, 0, 1]
    assert "a\\x00b" in load_event(runtime, ids[2]).last_error


def test_a_handler_that_swallows_a_database_error_costs_only_its_own_event(client, runtime, router):
    from contextlib import suppress

    from sqlalchemy import text
    from sqlalchemy.exc import DBAPIError

    def swallow(event, ctx):
        write_effect(event, ctx)
        if event.external_id == "evt_swallow_1":
            with suppress(DBAPIError):  # swallowed: the transaction is now aborted
                ctx.session.execute(text("SELECT 1 / 0"))

    router.on("stripe", "invoice.paid")(swallow)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [deliver(client, endpoint, f"evt_swallow_{n}") for n in range(3)]
    from hooklatch.workers.worker.jobs import process_events

    counts = process_events(runtime, ids)
    assert counts["processed"] == 2, counts
    assert [len(effect_rows(runtime, f"evt_swallow_{n}")) for n in range(3)] == [1, 0, 1]
    assert load_event(runtime, ids[1]).status == "pending"
