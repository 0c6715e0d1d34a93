"""The embedded default (SQLite, no Redis, no advisory locks) keeps a fifo key's order, a
failing head holding its key, and a parked key, as PostgreSQL does."""

from __future__ import annotations

import time

import pytest

from hooklatch.ordering.service import blocked_keys
from hooklatch.workers.worker.jobs import process_events
from tests.support.database import count, sqlite_settings
from tests.support.pipeline import configure_ordering, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_sqlite_ordering"


@pytest.fixture
def settings(settings, tmp_path):
    return sqlite_settings(settings, tmp_path / "db", max_attempts=2)


def send(client, endpoint, event_type, customer):
    body = stripe_event(event_type=event_type, customer=customer)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def test_a_fifo_key_on_sqlite_runs_in_order_and_parks_behind_a_dead_event(client, runtime, router):
    ran = []

    @router.on("stripe", "step.*")
    def step(event, ctx):
        ran.append(event.id)
        if event.type == "step.fail":
            raise RuntimeError("fails")

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo")
    ok = [send(client, endpoint, "step.ok", "cus_a") for _ in range(3)]
    dead = send(client, endpoint, "step.fail", "cus_a")
    behind = send(client, endpoint, "step.ok", "cus_a")
    other = send(client, endpoint, "step.ok", "cus_b")

    # In reverse: the worker is handed the ids in any order, the key runs in its own.
    process_events(runtime, [other, behind, dead, *reversed(ok)])
    assert [i for i in ran if i != other] == [*ok, dead]  # held behind the failing one
    assert other in ran
    ran.clear()
    time.sleep(runtime.settings.retry_max_seconds)
    process_events(runtime, [dead, behind])  # the retry: dies, and parks the key
    assert ran == [dead]
    process_events(runtime, [behind])
    assert ran == [dead]
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'") == 1
    with runtime.session_factory() as session:
        assert [(b.key, b.event_id, b.waiting) for b in blocked_keys(session)] == [
            ("cus_a", dead, 1)
        ]
