"""A sender's lease over a pass that outlasts it, and outcomes recorded by a sender that
lost its lease meanwhile: one relay sends to a destination at a time, and what another
relay recorded since is never undone."""

from __future__ import annotations

import time
from dataclasses import replace

from sqlalchemy import text

from hooklatch.forwarding import sending
from hooklatch.forwarding.kinds.base import Outcome
from hooklatch.forwarding.models import Forward
from hooklatch.forwarding.sending import Policy
from hooklatch.workers.relay.forwarder import Sender
from tests.support.forwarding import REDIS_URL, add_destination, unique
from tests.support.forwarding_rows import seed_event
from tests.support.pipeline import make_endpoint


def keyed_forwards(runtime, destination, endpoint, n, key="cus_1"):
    ids = []
    with runtime.session_factory.begin() as session:
        for index in range(n):
            event = seed_event(runtime, endpoint, unique(f"evt_{index}_"))
            row = Forward(
                destination_id=destination,
                event_id=event,
                ordering_key=key,
                status="pending",
                attempts=0,
                created_at=runtime.clock(),
            )
            session.add(row)
            session.flush()
            ids.append(row.id)
    return ids


class Slow:
    """Acknowledges each call after ``seconds``; while sending its ``probe_at``-th call,
    notes whether another relay could take the destination's lease."""

    at_once = 1000

    def __init__(self, runtime, destination, seconds, probe_at):
        self.runtime, self.destination = runtime, destination
        self.seconds, self.probe_at = seconds, probe_at
        self.calls = 0
        self.taken_by_another: bool | None = None

    def publish(self, messages):
        self.calls += 1
        time.sleep(self.seconds)
        if self.calls == self.probe_at:
            with self.runtime.session_factory.begin() as session:
                self.taken_by_another = sending.take_lease(
                    session, self.destination, "another-relay", self.runtime.clock(), 60
                )
        return [Outcome(delivered=True) for _ in messages]

    def close(self):
        pass


def test_a_pass_of_one_keys_forwards_longer_than_the_lease_keeps_the_lease(runtime):
    runtime.settings = replace(
        runtime.settings, forward_lease_seconds=1.0, forward_timeout_seconds=0.5
    )
    endpoint, _ = make_endpoint(runtime)
    destination = add_destination(runtime, "redis", {"url": REDIS_URL, "stream": unique("s-")})
    keyed_forwards(runtime, destination, endpoint, 6)
    # Each call is within the timeout; the pass's six calls (one per wave: one key) are not
    # within the lease.
    publisher = Slow(runtime, destination, seconds=0.4, probe_at=5)
    sender = Sender(runtime, destination, "this-relay")
    sender.open = lambda target: publisher  # type: ignore[method-assign]
    assert sender.renew()
    sender.step()
    assert publisher.calls == 6
    assert publisher.taken_by_another is False


def test_a_failure_recorded_late_leaves_a_forward_another_relay_delivered_as_it_is(runtime):
    endpoint, _ = make_endpoint(runtime)
    destination = add_destination(runtime, "redis", {"url": REDIS_URL, "stream": unique("s-")})
    (forward,) = keyed_forwards(runtime, destination, endpoint, 1)
    policy = Policy(max_attempts=1, retry_base_seconds=1, retry_max_seconds=1, lease_seconds=30)
    with runtime.session_factory() as session:
        found, _ = sending.due(session, destination, runtime.clock(), 10)
    # Two relays read the same forward (the first one's lease ran out while it sent):
    # the second's delivery is recorded first, then the first's failure.
    with runtime.session_factory.begin() as session:
        sending.record_outcomes(
            session, destination, [(found[0], Outcome(True))], [], runtime.clock(), policy
        )
    with runtime.session_factory.begin() as session:
        sending.record_outcomes(
            session,
            destination,
            [(found[0], Outcome(False, "timeout"))],
            [],
            runtime.clock(),
            policy,
        )
    with runtime.session_factory() as session:
        status = session.execute(
            text("SELECT status FROM forwards WHERE id = :id"), {"id": forward}
        ).scalar_one()
    assert status == "delivered"


class OneAtATime:
    """Acknowledges one message a call, after ``seconds`` (as RabbitMQ's confirms go)."""

    at_once = 1

    def __init__(self, seconds):
        self.seconds = seconds
        self.calls = 0

    def publish(self, messages):
        self.calls += 1
        time.sleep(self.seconds)
        return [Outcome(delivered=True) for _ in messages]

    def close(self):
        pass


def test_a_sender_told_to_stop_mid_pass_stops_after_the_message_in_hand(runtime):
    import threading

    endpoint, _ = make_endpoint(runtime)
    destination = add_destination(runtime, "redis", {"url": REDIS_URL, "stream": unique("s-")})
    for index in range(20):
        keyed_forwards(runtime, destination, endpoint, 1, key=f"cus_{index}")
    publisher = OneAtATime(0.25)
    sender = Sender(runtime, destination, "this-relay")
    sender.open = lambda target: publisher  # type: ignore[method-assign]
    assert sender.renew()
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    time.sleep(0.6)
    stop.set()  # SIGTERM: as the relay's main sets it
    stopping = time.monotonic()
    thread.join(timeout=10)
    # What the relay's STOP_SECONDS leaves a sender is about one call to its destination.
    assert time.monotonic() - stopping < 1.0
    assert publisher.calls <= 4
    with runtime.session_factory() as session:
        delivered = session.execute(
            text("SELECT count(*) FROM forwards WHERE status = 'delivered'")
        ).scalar_one()
    assert delivered == publisher.calls  # what was sent is recorded before it stops
