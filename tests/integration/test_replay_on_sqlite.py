"""The embedded default (SQLite, no Redis: replays run in the relay's own thread) keeps its
bulk replays' window, and cancelling stops the replays asked for and not run, as on
PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hooklatch.embedded.sinks import InlineSink
from hooklatch.events import bulk_replays
from hooklatch.workers.relay.loop import Relay
from tests.support.bulk_replays import begin_bulk_replay, step
from tests.support.database import sqlite_settings
from tests.support.pipeline import make_dead, make_endpoint, runs_of


@pytest.fixture
def settings(settings, tmp_path):
    sqlite = sqlite_settings(settings, tmp_path / "db")
    return sqlite


def test_on_sqlite_a_batch_keeps_its_window_and_a_cancel_stops_what_has_not_run(
    client, runtime, router
):
    ran = runs_of(router)
    endpoint, _ = make_endpoint(runtime)
    dead = make_dead(client, runtime, endpoint, *[f"evt_s{n}" for n in range(5)], event_type="x.y")
    relay = Relay(runtime, InlineSink(runtime))
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, cap=100, now=t0)

    def step_at(seconds):
        return step(runtime, t0 + timedelta(seconds=seconds), window=2)

    assert step_at(1) == 2
    assert step_at(2) == 0  # two wait to be run
    assert relay.relay_once() == 2  # run in this thread
    assert ran == dead[:2]
    assert step_at(3) == 2
    with runtime.session_factory.begin() as session:
        cancelled = bulk_replays.cancel(session, batch_id, actor="bob", now=t0)
        assert cancelled.replays == 2
    assert relay.relay_once() == 0
    assert ran == dead[:2]
