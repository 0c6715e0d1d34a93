"""Hourly activity per endpoint, for the console: deliveries counted by the web process
and written in batches, attempts counted in the worker's transaction, when each secret
last verified a delivery, and the side tables' retention."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import text

from hooklatch import audit
from hooklatch.events import activity, bulk_replays
from hooklatch.events.browse import EventFilter
from hooklatch.operations.retention import Retention
from tests.support.database import count
from tests.support.pipeline import deliver, drain, make_endpoint, post_json
from tests.support.signing import stripe_event, stripe_headers

OLD, NEW = "whsec_old_secret", "whsec_new_secret"


def counts(runtime, endpoint):
    with runtime.session_factory() as session:
        return activity.overview(session, now=runtime.clock())["counts"].get(endpoint, {})


def test_deliveries_and_attempts_are_counted_by_hour_endpoint_and_outcome(client, runtime, router):
    runtime.settings = replace(runtime.settings, max_attempts=2)
    router.on("stripe", "effect.ok")(lambda event, ctx: None)

    @router.on("stripe", "effect.fails")
    def fails(event, ctx):
        raise RuntimeError("down")

    endpoint, _ = make_endpoint(runtime, secrets=[OLD])
    deliver(client, endpoint, "evt_ok", "effect.ok", secret=OLD)
    deliver(client, endpoint, "evt_ok", "effect.ok", secret=OLD)  # a duplicate
    deliver(client, endpoint, "evt_fails", "effect.fails", secret=OLD)
    deliver(client, endpoint, "evt_nobody", "nobody.listens", secret=OLD)
    body = stripe_event("evt_forged")
    assert post_json(client, endpoint, body, stripe_headers(body, "whsec_wrong")).status_code == 401
    client.post("/hooks/ep_nobody_registered", data=body)  # no endpoint: never a row
    runtime.activity.flush()
    with runtime.engine.begin() as c:  # the failed attempt's retry is due at once
        c.execute(text("UPDATE events SET next_attempt_at = now()"))
    drain(runtime, until=lambda: count(runtime, "SELECT count(*) FROM attempts") >= 4)
    drain(
        runtime,
        until=lambda: count(runtime, "SELECT count(*) FROM events WHERE status = 'dead'") == 1,
    )

    assert counts(runtime, endpoint) == {
        "accepted": 3,
        "duplicate": 1,
        "bad_signature": 1,
        "processed": 1,
        "ignored": 1,
        "failed": 2,
        "dead": 1,
    }
    assert count(runtime, "SELECT count(*) FROM activity WHERE endpoint_id <> :e", e=endpoint) == 0
    with runtime.session_factory() as session:
        hours = activity.series(session, now=runtime.clock())
    assert len(hours) == 24
    assert (hours[-1]["deliveries"], hours[-1]["failures"]) == (4, 3)  # refusal, 2 failed


def test_the_secret_that_verified_a_delivery_is_stamped(client, runtime):
    endpoint, _ = make_endpoint(runtime, secrets=[OLD, NEW])
    deliver(client, endpoint, "evt_new_1", secret=NEW)
    runtime.activity.flush()
    stamped = (
        "SELECT count(*) FROM endpoint_secrets "
        "WHERE fingerprint = :f AND last_verified_at IS NOT NULL"
    )
    assert count(runtime, stamped, f=runtime.box.fingerprint(NEW)) == 1
    assert count(runtime, stamped, f=runtime.box.fingerprint(OLD)) == 0


def test_counts_of_an_endpoint_deleted_before_the_flush_are_dropped_not_failed(client, runtime):
    gone, _ = make_endpoint(runtime, name="gone")
    kept, _ = make_endpoint(runtime, name="kept")
    deliver(client, gone, "evt_g")
    deliver(client, kept, "evt_k")
    with runtime.engine.begin() as c:
        c.execute(text("DELETE FROM endpoints WHERE id = :e"), {"e": gone})
    runtime.activity.flush()
    assert counts(runtime, kept) == {"accepted": 1}


def test_old_activity_finished_batches_and_old_audit_entries_are_deleted(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    deliver(client, endpoint, "evt_a")
    runtime.activity.flush()
    with runtime.engine.begin() as c:
        c.execute(text("UPDATE events SET status = 'dead'"))
        c.execute(text("DELETE FROM outbox"))
    now = runtime.clock()
    with runtime.session_factory.begin() as session:
        bulk_replays.start(
            session, EventFilter(status="dead"), actor="a", reason="r", cap=10, rate=1, now=now
        )
        audit.record(session, actor="a", action="endpoint_disabled", target="x", now=now)
    running = now + timedelta(days=31)
    Retention(replace(runtime, clock=lambda: running)).once()
    # The running batch stays, and its audit entry (kept 365 days).
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 1
    assert count(runtime, "SELECT count(*) FROM activity") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 2

    with runtime.engine.begin() as c:
        c.execute(text("UPDATE replay_batches SET status = 'done'"))
    later = now + timedelta(days=366)
    done = Retention(replace(runtime, clock=lambda: later)).once()
    assert (done.deleted_batches, done.deleted_audit) == (1, 2)
