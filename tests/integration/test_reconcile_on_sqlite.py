"""The embedded default (SQLite, no Redis) reconciles as PostgreSQL does: the lease, the
pulled events under the delivery's key, the cursor, the relay's thread taking a run asked
for."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from sqlalchemy import select

from hooklatch.embedded.sinks import InlineSink
from hooklatch.events.models import Event
from hooklatch.reconcile.models import ProviderHook, ReconcileRun, ReconcileState
from hooklatch.reconcile.runs import Busy, RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import request_reconcile
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.reconcile import ReconcileRunner
from tests.support.database import sqlite_settings
from tests.support.fake_stripe import FakeStripe
from tests.support.live_app import served
from tests.support.pipeline import runs_of
from tests.support.reconcile import stripe_registered

KEY = "rk_test_sqlite_0123456789abcdef"


@pytest.fixture
def settings(settings, tmp_path):
    return sqlite_settings(settings, tmp_path / "db")


def registered(runtime, fake) -> str:
    return stripe_registered(runtime, fake, KEY)[0]


def test_a_run_asked_for_is_taken_by_the_relay_thread_on_sqlite(client, runtime):
    with FakeStripe() as fake:
        fake.add_key(KEY)
        runtime.settings = replace(runtime.settings, public_url="http://127.0.0.1:9")
        endpoint = registered(runtime, fake)
        now = fake.now()
        events = [
            fake.create_event("invoice.paid", {"id": f"in_{n}"}, now - 300 + n) for n in range(150)
        ]
        request_reconcile(runtime, endpoint, RunRequest(trigger="api", requested_by="test"))

        assert ReconcileRunner(runtime).once() == 1

        with runtime.session_factory() as session:
            stored = session.scalars(select(Event.external_id).order_by(Event.id)).all()
            [run] = session.scalars(select(ReconcileRun)).all()
            state = session.get(ReconcileState, endpoint)
        assert stored == [e["id"] for e in events]  # oldest first
        assert (run.status, run.fetched, run.trigger) == ("finished", 150, "api")
        assert state is not None and state.cursor is not None and state.requested is None
        again = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="t"))
        assert again["fetched"] == 0
        with runtime.session_factory() as session:
            counts = Counter(session.scalars(select(Event.external_id)))
        assert set(counts.values()) == {1}


def test_one_run_per_endpoint_at_a_time_on_sqlite(client, runtime):
    with FakeStripe() as fake:
        fake.add_key(KEY)
        endpoint = registered(runtime, fake)
        first, second = reconciler(runtime), reconciler(runtime)
        with first.session_factory.begin() as session:
            first._take_lease(session, endpoint, runtime.clock())
        with pytest.raises(Busy):
            second.run(endpoint, RunRequest(trigger="cli", requested_by="test"))


def test_pulled_events_beside_delivered_ones_are_stored_and_run_once_on_sqlite(
    app, runtime, router
):
    """Deliveries and a run's pulled events under one key: each event stored once, its
    handlers run once, whichever way it came."""
    ran = runs_of(router, "stripe")
    relay = Relay(runtime, InlineSink(runtime))
    with served(app) as url, FakeStripe() as fake:
        runtime.settings = replace(runtime.settings, public_url=url)
        fake.add_key(KEY)
        endpoint = registered(runtime, fake)
        with runtime.session_factory() as session:
            hook = session.get(ProviderHook, endpoint)
            assert hook is not None
            hook_id = hook.hook_id
        now = fake.now()
        events = [
            fake.create_event("invoice.paid", {"id": f"in_{n}"}, now - 400 + n) for n in range(250)
        ]
        for event in events[::3]:
            assert fake.deliver(str(event["id"]), hook_id) == 200

        first = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="t"))
        second = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="t"))

    assert (first["status"], first["fetched"], first["present"]) == ("finished", 166, 0)
    assert (second["status"], second["fetched"], second["missing"]) == ("finished", 0, 0)
    while relay.relay_once():
        pass
    assert len(ran) == 250 and set(Counter(ran).values()) == {1}
    with runtime.session_factory() as session:
        origins = Counter(session.scalars(select(Event.origin)))
        state = session.get(ReconcileState, endpoint)
    assert origins == {"api": 166, "webhook": 84}
    assert state is not None and state.cursor is not None
