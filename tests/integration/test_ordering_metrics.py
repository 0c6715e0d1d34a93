"""Blocked ordering keys are counted for /metrics (hooklatch_ordering_blocked_keys)."""

from __future__ import annotations

from sqlalchemy import text

from hooklatch.operations.backlog import read_backlog
from tests.support.pipeline import configure_ordering, make_endpoint

EVENT = (
    "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts, body,"
    " headers, body_sha256, received_at, next_attempt_at, mismatched_duplicates,"
    " ordering_key, ordering_position)"
    " VALUES (:e, 'stripe', :x, 't', :s, :a, '\\x7b7d', '{}', 'x', now(), now(), 0, :k, 0)"
    " RETURNING id"
)


def test_parked_keys_and_failing_heads_are_counted_and_nothing_else(runtime):
    endpoint, _ = make_endpoint(runtime)
    configure_ordering(runtime, endpoint, policy="fifo")
    assert read_backlog(runtime).blocked_keys == 0
    with runtime.engine.begin() as c:

        def event(external_id, status, attempts, key):
            values = {"e": endpoint, "x": external_id, "s": status, "a": attempts, "k": key}
            return c.execute(text(EVENT), values).scalar_one()

        dead = event("evt_dead", "dead", 8, "cus_parked")
        event("evt_behind", "pending", 0, "cus_parked")
        event("evt_failing", "pending", 2, "cus_failing")  # its key's first: blocked
        event("evt_waiting", "pending", 0, "cus_failing")
        event("evt_fresh", "pending", 0, "cus_fine")  # first attempt not made yet
        event("evt_behind_fresh", "pending", 3, "cus_fine")  # not its key's first
        c.execute(
            text(
                "INSERT INTO ordering_keys (endpoint_id, key, parked_event_id, parked_at,"
                " updated_at) VALUES (:e, 'cus_parked', :d, now(), now())"
            ),
            {"e": endpoint, "d": dead},
        )
    assert read_backlog(runtime).blocked_keys == 2
