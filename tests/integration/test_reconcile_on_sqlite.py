"""The embedded default (SQLite, no Redis) reconciles as PostgreSQL does: the lease, the
events pulled from Stripe stored once under the delivery's key beside those delivered,
and the cursor. Against FakeStripe, with the app served where it delivers."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from hooklatch.embedded.sinks import InlineSink
from hooklatch.events.models import Event
from hooklatch.providers.remote import Place
from hooklatch.reconcile.models import ProviderHook, ReconcileState
from hooklatch.reconcile.runs import Busy, RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import NewRegistration, add_registered
from hooklatch.workers.relay.loop import Relay
from tests.support.database import sqlite_settings
from tests.support.fake_stripe import FakeStripe
from tests.support.live_app import served
from tests.support.pipeline import runs_of

KEY = "rk_test_sqlite_0123456789abcdef"


@pytest.fixture
def settings(settings, tmp_path):
    return sqlite_settings(settings, tmp_path / "db")


def run_now(runtime, endpoint):
    return reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))


def test_on_sqlite_a_run_stores_each_missing_event_once_and_holds_its_lease(app, runtime, router):
    ran = runs_of(router, "stripe")
    relay = Relay(runtime, InlineSink(runtime))
    with served(app) as url, FakeStripe() as fake:
        runtime.settings = replace(runtime.settings, public_url=url)
        fake.add_key(KEY)
        new = NewRegistration(
            provider="stripe",
            name="billing",
            credential={"api_key": KEY},
            event_types=["invoice.paid"],
            place=Place(api_url=fake.url),
        )
        endpoint = add_registered(runtime, new, actor="test")["id"]
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

        first = run_now(runtime, endpoint)
        second = run_now(runtime, endpoint)
        with runtime.session_factory.begin() as session:
            session.execute(
                update(ReconcileState)
                .where(ReconcileState.endpoint_id == endpoint)
                .values(lease_owner="elsewhere", lease_until=runtime.clock() + timedelta(1))
            )
        with pytest.raises(Busy):
            run_now(runtime, endpoint)

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
