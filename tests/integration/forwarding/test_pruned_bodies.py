"""A delivered forward whose event's body retention pruned cannot be sent again: a replay
counts it apart and leaves it, and one found without its body all the same goes dead
without holding back the forwards of its key written after it, which a replay of it
could never release."""

from __future__ import annotations

from sqlalchemy import text

from hooklatch.forwarding import sending
from hooklatch.forwarding.destinations import ReplaySet
from hooklatch.forwarding.models import Forward
from hooklatch.forwarding.sending import Policy
from hooklatch.services.forwarding import replay_forwards
from tests.support.forwarding import REDIS_URL, add_destination, unique
from tests.support.forwarding_rows import seed_event
from tests.support.pipeline import make_endpoint

POLICY = Policy(max_attempts=5, retry_base_seconds=1, retry_max_seconds=1, lease_seconds=30)


def forward_of(runtime, destination, endpoint, status, key="cus_1"):
    event = seed_event(runtime, endpoint, unique("evt_"))
    with runtime.session_factory.begin() as session:
        row = Forward(
            destination_id=destination,
            event_id=event,
            ordering_key=key,
            status=status,
            attempts=1 if status == "delivered" else 0,
            created_at=runtime.clock(),
        )
        session.add(row)
        session.flush()
        return event, row.id


def one_pass(runtime, destination):
    with runtime.session_factory() as session:
        found, bodiless = sending.due(session, destination, runtime.clock(), 100)
    with runtime.session_factory.begin() as session:
        sending.record_outcomes(session, destination, [], bodiless, runtime.clock(), POLICY)
    return [due.message.forward_id for due in found], bodiless


def test_a_replayed_forward_whose_body_is_gone_holds_back_no_later_forward_of_its_key(runtime):
    endpoint, _ = make_endpoint(runtime)
    destination = add_destination(runtime, "redis", {"url": REDIS_URL, "stream": unique("s-")})
    pruned_event, _ = forward_of(runtime, destination, endpoint, "delivered")
    with runtime.engine.begin() as connection:  # retention's payload clock
        connection.execute(
            text("UPDATE events SET body = NULL, headers = NULL WHERE id = :id"),
            {"id": pruned_event},
        )
    # The consumer lost its data: every delivered forward is sent again.
    replayed = replay_forwards(
        runtime,
        destination,
        ReplaySet(statuses=("delivered",)),
        dry_run=False,
        actor="test",
        reason="consumer restored from backup",
    )
    assert (replayed["matched"], replayed["without_body"], replayed["replayed"]) == (0, 1, 0)
    assert one_pass(runtime, destination) == ([], [])
    _, later = forward_of(runtime, destination, endpoint, "pending")
    due, _ = one_pass(runtime, destination)
    assert due == [later]


def test_a_forward_found_without_its_body_goes_dead_and_its_key_goes_on(runtime):
    endpoint, _ = make_endpoint(runtime)
    destination = add_destination(runtime, "redis", {"url": REDIS_URL, "stream": unique("s-")})
    pruned_event, pruned = forward_of(runtime, destination, endpoint, "pending")
    _, later = forward_of(runtime, destination, endpoint, "pending")
    with runtime.engine.begin() as connection:
        connection.execute(
            text("UPDATE events SET body = NULL WHERE id = :id"), {"id": pruned_event}
        )
    assert one_pass(runtime, destination) == ([later], [pruned])
    with runtime.engine.connect() as connection:
        status = connection.execute(
            text("SELECT status, last_error FROM forwards WHERE id = :id"), {"id": pruned}
        ).one()
    assert status[0] == "dead" and "body is gone" in status[1]
    due, _ = one_pass(runtime, destination)
    assert due == [later]
