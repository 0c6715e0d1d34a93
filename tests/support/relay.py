"""Driving the relay by hand: events ingested through the view, a relay and its queue, a
clock moved by the test."""

from dataclasses import replace
from datetime import timedelta

from redis import Redis
from rq import Queue

from hooklatch.db import utcnow
from hooklatch.jobs import SERIALIZER
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import RQSink
from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def ingest(client, runtime, n):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for i in range(n):
        body = stripe_event(f"evt_relay_{i}")
        response = client.post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
        )
        assert response.status_code == 200


def relay_for(runtime):
    redis = Redis.from_url(runtime.settings.redis_url)
    return Relay(runtime, RQSink(runtime, redis)), Queue(
        runtime.settings.queue_name, connection=redis, serializer=SERIALIZER
    )


def one_job(client, runtime, n):
    """``n`` events ingested and handed out by a relay in one job: the relay, its queue and
    the job's id."""
    ingest(client, runtime, n)
    relay, queue = relay_for(runtime)
    assert relay.relay_once() == n
    [job_id] = jobs_of(runtime)
    return relay, queue, job_id


def jobs_of(runtime):
    with runtime.engine.connect() as c:
        return {r[0] for r in c.exec_driver_sql("SELECT DISTINCT job_id FROM outbox")}


WAITING = "SELECT count(*) FROM outbox WHERE job_id IS NULL"


class Clock:
    """runtime.clock, moved by hand."""

    def __init__(self):
        self.now = utcnow()

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += timedelta(seconds=seconds)


def clocked(runtime, **settings) -> Clock:
    """runtime's settings changed as given, and its clock one the test moves."""
    runtime.settings = replace(runtime.settings, **settings)
    runtime.clock = clock = Clock()
    return clock


def second_sweep(relay, clock) -> int:
    """What a sweep a sweep interval after a first one (which must find nothing lost)
    re-dispatches: a job that is neither queued nor holding its lease is lost only when a
    later sweep, half a sweep interval or more after the first sighting, still finds it so."""
    assert relay.sweep_once() == 0
    clock.advance(relay.settings.sweep_interval_seconds)
    return relay.sweep_once()
