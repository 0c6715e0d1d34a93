"""A job holding a busy key runs a bounded share of the key's events beyond its own, then
hands the key back to the relay: a key that never empties cannot keep one job for ever,
however few events each of the job's transactions runs."""

from __future__ import annotations

from sqlalchemy import select

from hooklatch.events.models import OutboxEntry
from hooklatch.workers.worker import jobs, processing
from tests.support.database import count
from tests.support.pipeline import configure_ordering, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_drain"


def send(client, endpoint):
    body = stripe_event(event_type="step.ok", customer="cus_busy")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def test_a_job_runs_its_drain_of_a_keys_events_then_hands_the_key_back(
    client, runtime, router, monkeypatch
):
    ran = []

    @router.on("stripe", "step.*")
    def step(event, ctx):
        ran.append(event.id)

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo")
    ids = [send(client, endpoint) for _ in range(10)]
    # One event per transaction: each carries the key's next event into the next one,
    # where it is among the ids that transaction was given.
    monkeypatch.setattr(processing, "TRANSACTION_SECONDS", 0.0)
    monkeypatch.setattr(jobs, "DRAIN_EVENTS", 3)

    jobs.process_events(runtime, [ids[0]])

    assert ran == ids[:4]  # its own event, then three more of the key
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'") == 6
    with runtime.session_factory() as session:
        handed_back = session.scalars(
            select(OutboxEntry.event_id).where(OutboxEntry.job_id.is_(None))
        ).all()
    assert ids[4] in handed_back  # the relay hands the key's next event out again
