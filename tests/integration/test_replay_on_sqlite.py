"""The embedded default (SQLite, no Redis: replays run in the relay's own thread) keeps its
bulk replays' window, and cancelling stops the replays asked for and not run, as on
PostgreSQL."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from alembic import command

from hooklatch.embedded.sinks import InlineSink
from hooklatch.events import batches
from hooklatch.events.browse import EventFilter
from hooklatch.migrations import alembic_config
from hooklatch.workers.relay.loop import Relay
from tests.support.pipeline import make_dead, make_endpoint


@pytest.fixture
def settings(settings, tmp_path):
    sqlite = replace(settings, database_url=None, redis_url=None, instance_path=tmp_path / "db")
    sqlite.instance_path.mkdir()
    command.upgrade(alembic_config(sqlite.sqlalchemy_url), "head")
    return sqlite


def test_on_sqlite_a_batch_keeps_its_window_and_a_cancel_stops_what_has_not_run(
    client, runtime, router
):
    ran = []
    router.on("stripe", "*")(lambda event, ctx: ran.append(event.id))
    endpoint, _ = make_endpoint(runtime)
    dead = make_dead(client, runtime, endpoint, *[f"evt_s{n}" for n in range(5)], event_type="x.y")
    relay = Relay(runtime, InlineSink(runtime))
    t0 = runtime.clock()
    with runtime.session_factory.begin() as session:
        batch_id = batches.start(
            session,
            EventFilter(status="dead"),
            actor="alice",
            reason="fixed",
            cap=100,
            rate=100.0,
            now=t0,
        ).id

    def step(seconds):
        with runtime.session_factory.begin() as session:
            now = t0 + timedelta(seconds=seconds)
            return batches.advance(session, now=now, window=2)

    assert step(1) == 2
    assert step(2) == 0  # two wait to be run
    assert relay.relay_once() == 2  # run in this thread
    assert ran == dead[:2]
    assert step(3) == 2
    with runtime.session_factory.begin() as session:
        cancelled = batches.cancel(session, batch_id, actor="bob", now=t0)
        assert cancelled.replays == 2
    assert relay.relay_once() == 0
    assert ran == dead[:2]
