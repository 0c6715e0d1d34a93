"""Reconcile under faults: the provider's API answering 500, 401 (a revoked key) and 429
in the middle of a run, the relay running it killed with SIGKILL, and events arriving by
webhook while they are fetched. Nothing is lost, nothing runs twice, the cursor is never
ahead of what was stored, and each error shows with its reason. Against FakeStripe."""

from __future__ import annotations

import signal
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text, update

from hooklatch.endpoints.models import Endpoint
from hooklatch.events.models import Event
from hooklatch.reconcile.models import ReconcileRun, ReconcileState
from hooklatch.reconcile.runs import Reconciler, RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import (
    request_reconcile,
    set_credential,
)
from tests.support.pipeline import drain, runs_of, wait_for
from tests.support.processes import hooklatch_cmd, process_env
from tests.support.reconcile import reconciler_with, second_run, stripe_and_app, stripe_registered

KEY = "rk_test_faults_0123456789QZXW"
NEW_KEY = "rk_test_faults_rotated_9876YVUT"


def registered(runtime, fake, *, event_types=("invoice.paid",)):
    return stripe_registered(runtime, fake, KEY, event_types=event_types)[0]


def lost_events(fake, count, *, span=480):
    """Events Stripe never delivered (hooklatch was away), oldest first, made over the
    last ``span`` seconds, since the endpoint was registered (where its first run starts)."""
    now = fake.now()
    return [
        fake.create_event("invoice.paid", {"id": f"in_{n}"}, now - span - 20 + n * span // count)
        for n in range(count)
    ]


def events_requests(fake):
    return [r for r in fake.requests if r.method == "GET" and r.path == "/v1/events"]


def run_now(runtime, endpoint, **request):
    return reconciler(runtime).run(
        endpoint, RunRequest(trigger="cli", requested_by="test", **request)
    )


def state_of(runtime, endpoint):
    with runtime.session_factory() as session:
        state = session.get(ReconcileState, endpoint)
        assert state is not None
        session.expunge(state)
        return state


def stored(runtime):
    with runtime.session_factory() as session:
        return dict(session.execute(select(Event.external_id, Event.occurred_at)).all())


def assert_cursor_behind_what_was_stored(runtime, endpoint, events):
    """Every listed event created at or before the cursor is stored."""
    cursor = state_of(runtime, endpoint).cursor
    if cursor is None:
        return
    have = stored(runtime)
    behind = [e["id"] for e in events if e["created"] <= cursor.timestamp()]
    assert [i for i in behind if i not in have] == []


def assert_each_ran_once(ran, events):
    assert len(ran) == len(events)
    assert set(Counter(ran).values()) == {1}


def test_a_provider_failing_mid_listing_cuts_the_run_short_and_the_next_resumes(
    app, runtime, router
):
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        events = lost_events(fake, 350)
        fake.script(500, times=3, after=1)  # the second page, and both its retries

        cut = run_now(runtime, endpoint)

        assert (cut["status"], cut["stop_reason"]) == ("cut_short", "server_error")
        assert "HTTP 500" in cut["error"] and cut["api_errors"] == 3
        assert cut["requests"] == 4 and cut["pages"] == 1
        # What the first page listed is stored; the cursor stays, the listing never
        # reached it.
        assert cut["fetched"] == 100
        assert state_of(runtime, endpoint).cursor is None
        assert state_of(runtime, endpoint).errors_total == {"server_error": 3}

        resumed = run_now(runtime, endpoint)

        # It goes on from the page that failed, never the newest pages again.
        assert resumed["status"] == "finished"
        assert (resumed["fetched"], resumed["present"], resumed["pages"]) == (250, 0, 3)
        assert "starting_after" in events_requests(fake)[4].params
        assert state_of(runtime, endpoint).resume is None
        assert_cursor_behind_what_was_stored(runtime, endpoint, events)
        drain(runtime)
        assert_each_ran_once(ran, events)


@pytest.mark.parametrize(
    ("budget", "reason"),
    [({"max_pages": 2}, "budget_pages"), ({"max_requests": 2}, "budget_requests")],
)
def test_a_run_stops_at_its_budget_says_so_and_a_larger_one_resumes(
    app, runtime, router, budget, reason
):
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        events = lost_events(fake, 250)
        small = reconciler_with(runtime, **budget)

        cut = small.run(endpoint, RunRequest(trigger="cli", requested_by="test"))

        assert (cut["status"], cut["stop_reason"]) == ("cut_short", reason)
        assert (cut["requests"], cut["pages"], cut["fetched"]) == (2, 2, 200)
        assert len([r for r in fake.requests if r.path == "/v1/events"]) == 2
        assert "budget" in str(cut["error"])
        assert state_of(runtime, endpoint).cursor is None
        assert state_of(runtime, endpoint).resume is not None
        resumed = run_now(runtime, endpoint)
        # The next run reads on from the third page: a backlog larger than one run's
        # budget is read through, a budget's worth a run.
        assert (resumed["status"], resumed["fetched"], resumed["present"]) == ("finished", 50, 0)
        assert resumed["pages"] == 1
        third = [r for r in fake.requests if r.path == "/v1/events"][2]
        assert "starting_after" in third.params
        # The cursor moves to when the first run's listing began: what was created after
        # is read by the next run, an overlap before it.
        cursor = state_of(runtime, endpoint).cursor
        assert cursor is not None
        assert str(cut["started_at"]) <= cursor.isoformat() < str(resumed["started_at"])
        drain(runtime)
        assert_each_ran_once(ran, events)


def test_a_key_revoked_mid_run_stops_it_at_once_and_a_rotated_key_resumes(
    app, runtime, router, caplog
):
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        events = lost_events(fake, 250)
        fake.script(401, after=2)

        cut = run_now(runtime, endpoint)

        assert (cut["status"], cut["stop_reason"]) == ("cut_short", "unauthorized")
        assert cut["requests"] == 3 and cut["api_errors"] == 1  # no retry of a 401
        assert "HTTP 401" in cut["error"]
        assert KEY not in cut["error"] and KEY[-4:] not in cut["error"]
        assert KEY[-4:] not in caplog.text
        fake.revoke(KEY)
        refused = run_now(runtime, endpoint)
        assert (refused["stop_reason"], refused["requests"]) == ("unauthorized", 1)
        assert state_of(runtime, endpoint).errors_total == {"unauthorized": 2}
        fake.add_key(NEW_KEY)
        set_credential(runtime, endpoint, {"api_key": NEW_KEY}, actor="test")

        resumed = run_now(runtime, endpoint)

        assert resumed["status"] == "finished"
        assert resumed["fetched"] + cut["fetched"] == 250
        drain(runtime)
        assert_each_ran_once(ran, events)
        assert_cursor_behind_what_was_stored(runtime, endpoint, events)


def test_a_rate_limit_mid_run_is_waited_out_as_the_provider_asks(app, runtime, router):
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        events = lost_events(fake, 150)
        fake.script(429, after=1, retry_after=1)

        started = time.monotonic()
        run = run_now(runtime, endpoint)

        assert time.monotonic() - started >= 1.0
        assert (run["status"], run["fetched"], run["api_errors"]) == ("finished", 150, 1)
        assert state_of(runtime, endpoint).errors_total == {"rate_limited": 1}
        drain(runtime)
        assert_each_ran_once(ran, events)


def test_a_rate_limit_waited_out_longer_than_the_lease_keeps_the_endpoint(app, runtime):
    """A run may wait out a rate limit for longer than its lease: it renews the lease as
    it waits, and no second run starts beside it."""
    seconds, started = [0.0], runtime.clock()
    tries: list[str] = []

    def sleep(delay):
        seconds[0] += delay
        if seconds[0] > 150 and not tries:
            tries.append(second_run(second, endpoint))

    def patient():
        return reconciler_with(
            runtime,
            clock=lambda: started + timedelta(seconds=seconds[0]),
            sleep=sleep,
            lease=timedelta(minutes=2),
            max_wait=600,
        )

    second = patient()
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        events = lost_events(fake, 150)
        fake.script(429, after=1, retry_after=300)

        run = patient().run(endpoint, RunRequest(trigger="cli", requested_by="test"))

        assert tries == ["busy"]
        assert (run["status"], run["fetched"]) == ("finished", 150)
        assert set(stored(runtime)) == {event["id"] for event in events}


def test_a_rate_limit_longer_than_the_run_may_wait_stops_it_without_waiting(app, runtime):
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        lost_events(fake, 150)
        fake.script(429, after=1, retry_after=3600)
        started = time.monotonic()
        run = run_now(runtime, endpoint)
        assert time.monotonic() - started < 10
        assert (run["status"], run["stop_reason"]) == ("cut_short", "rate_limited")
        assert "3600 s" in run["error"]
        assert state_of(runtime, endpoint).cursor is None


def test_events_delivered_while_they_are_fetched_are_stored_and_run_once(app, runtime, router):
    """The deliveries land after the run checked what is stored and before it stores: the
    unique key makes each one present, never a second event."""
    ran = runs_of(router, "stripe")

    class DeliveredMeanwhile(Reconciler):
        def _stored_ids(self, endpoint_id, external_ids):
            found = super()._stored_ids(endpoint_id, external_ids)
            for event in events[::2]:
                assert fake.deliver(event["id"], hook) == 200
            return found

    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        with runtime.session_factory() as session:
            from hooklatch.reconcile.models import ProviderHook

            hook_row = session.get(ProviderHook, endpoint)
            assert hook_row is not None
            hook = hook_row.hook_id
        events = lost_events(fake, 120)
        base = reconciler(runtime)
        meanwhile = DeliveredMeanwhile(
            session_factory=base.session_factory,
            box=base.box,
            provider=base.provider,
            settings=base.settings,
            public_url=base.public_url,
            clock=base.clock,
        )

        run = meanwhile.run(endpoint, RunRequest(trigger="cli", requested_by="test"))

        assert run["status"] == "finished"
        assert (run["fetched"], run["present"], run["missing"]) == (60, 60, 60)
        drain(runtime)
        assert_each_ran_once(ran, events)
        with runtime.session_factory() as session:
            origins = Counter(session.scalars(select(Event.origin)))
        assert origins == {"api": 60, "webhook": 60}


@pytest.mark.slow
def test_a_relay_killed_mid_run_loses_nothing_and_the_next_resumes_behind_the_cursor(
    app, runtime, router, proc_settings, procs
):
    """The relay takes a run asked for through the API, and is killed with SIGKILL while it
    stores (each stored event is made slow by a trigger). The cursor is behind what was
    stored; a second relay takes the endpoint once the lease runs out, resumes from the
    cursor, and every event runs once."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake)
        with runtime.session_factory.begin() as session:
            session.execute(
                update(Endpoint)
                .where(Endpoint.id == endpoint)
                .values(created_at=datetime.now(UTC) - timedelta(hours=1))
            )
        events = lost_events(fake, 1500, span=3000)
        with runtime.engine.begin() as connection:
            connection.execute(
                text(
                    "CREATE FUNCTION slow_api_events() RETURNS trigger AS $$ BEGIN "
                    "IF NEW.origin = 'api' THEN PERFORM pg_sleep(0.004); END IF; "
                    "RETURN NEW; END $$ LANGUAGE plpgsql"
                )
            )
            connection.execute(
                text(
                    "CREATE TRIGGER slow_api_events BEFORE INSERT ON events "
                    "FOR EACH ROW EXECUTE FUNCTION slow_api_events()"
                )
            )
        env = process_env(
            proc_settings,
            HOOKLATCH_RECONCILE_INTERVAL_SECONDS="3600",
            HOOKLATCH_RECONCILE_LEASE_SECONDS="3",
            HOOKLATCH_RECONCILE_OVERLAP_SECONDS="60",
        )
        request_reconcile(runtime, endpoint, RunRequest(trigger="api", requested_by="test"))
        first = procs("relay", hooklatch_cmd("relay"), env)
        wait_for(
            lambda: 400 <= len(stored(runtime)) < 1200,
            timeout=60,
            interval=0.02,
            message="the run storing",
            explain=lambda: first.log,
        )
        first.kill(signal.SIGKILL)
        at_kill = len(stored(runtime))
        assert 0 < at_kill < 1500
        cursor = state_of(runtime, endpoint).cursor
        assert cursor is not None and cursor < datetime.now(UTC)
        assert_cursor_behind_what_was_stored(runtime, endpoint, events)

        second = procs("relay", hooklatch_cmd("relay"), env)
        wait_for(
            lambda: len(stored(runtime)) == 1500,
            timeout=60,
            message="the second relay resuming",
            explain=lambda: second.log,
        )
        wait_for(
            lambda: state_of(runtime, endpoint).lease_owner is None,
            timeout=30,
            message="the resumed run finishing",
        )
        drain(runtime)
        assert_each_ran_once(ran, events)
        assert_cursor_behind_what_was_stored(runtime, endpoint, events)
        with runtime.session_factory() as session:
            runs = session.scalars(select(ReconcileRun).order_by(ReconcileRun.id)).all()
        assert [r.status for r in runs] == ["interrupted", "finished"]
        # The second run listed from the cursor (less the overlap) on, not from the start.
        assert runs[1].since is not None
        assert runs[1].since.timestamp() == pytest.approx(cursor.timestamp() - 60)
        assert runs[1].listed < 1500 and runs[1].fetched == 1500 - at_kill


def test_an_event_the_provider_cannot_give_readably_stops_the_run_before_it(app, runtime):
    """Never skipped: the events before it are stored, the cursor stays, the run says
    which event and why, and the next run meets it again."""
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint = registered(runtime, fake, event_types=["*"])  # every type, that one too
        events = lost_events(fake, 10)
        # A type longer than any stored (255 characters): parse refuses it.
        broken = fake.create_event("x" * 300, {"id": "in_broken"}, events[4]["created"])
        later = [fake.create_event("invoice.paid", {"id": "in_late"}, events[-1]["created"] + 1)]

        run = run_now(runtime, endpoint, everything=True)

        assert (run["status"], run["stop_reason"]) == ("cut_short", "bad_answer")
        assert str(broken["id"]) in run["error"]
        have = stored(runtime)
        assert {e["id"] for e in events[:4]} <= set(have)
        assert later[0]["id"] not in have
        assert state_of(runtime, endpoint).cursor is None
        assert run_now(runtime, endpoint, everything=True)["stop_reason"] == "bad_answer"
