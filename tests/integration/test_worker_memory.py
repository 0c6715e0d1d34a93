"""The work horse's memory is bounded by HOOKLATCH_WORKER_BODY_BYTES, whatever the sizes
of the bodies a job brings: tens of signed deliveries of a few MiB each, stored through
the ingest path and run by a real `hooklatch worker` in one job (unkeyed, or under one
key), then replayed by one horse. Its peak resident set (VmHWM) is read from /proc."""

from __future__ import annotations

import json
import uuid

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import FinishedJobRegistry, StartedJobRegistry
from sqlalchemy import select

from bench.procs import memory_mib
from hooklatch.events.models import Event, Replay
from hooklatch.events.replay import request_replay
from hooklatch.jobs import SERIALIZER
from tests.support.pipeline import configure_ordering, drain, make_endpoint, wait_for
from tests.support.processes import (
    hooklatch_cmd,
    listening,
    process_env,
    work_horse,
)
from tests.support.signing import stripe_event, stripe_headers

pytestmark = pytest.mark.slow

SECRET = "whsec_test_secret"
MIB = 1024 * 1024
DELIVERIES = 30
# Each body is about this size: line items as a large Stripe invoice lists them, so that
# the parsed payload is several times the body, as JSON's is.
BODY_MIB = 4
BUDGET_MIB = 8
# What the horse may grow by over its resident set before the job (docs/architecture.md,
# "What a work horse holds"): four times a group while it is read (its hex text and its
# bytes), or a group and one event's body, text and parsed payload (seven times the
# body); and room for what the first job loads and for the allocator. The job's bodies
# all at once, as claims once read them, are 30 times 4 MiB, three times over with their
# hex text: about 380 MiB.
GROWTH_BOUND_MIB = max(4 * max(BUDGET_MIB, BODY_MIB), BUDGET_MIB + 7 * BODY_MIB) + 60


def big_body(external_id: str, event_type: str, customer: str) -> bytes:
    line = {"id": "il_0000000", "amount": 1999, "description": "Seat licence, billed monthly"}
    count = BODY_MIB * MIB // len(json.dumps(line))
    lines = [{**line, "id": f"il_{n:07d}", "amount": n} for n in range(count)]
    return stripe_event(external_id, event_type=event_type, customer=customer, lines=lines)


def deliver_big(client, endpoint: str, event_type: str, customer: str = "cus_big") -> int:
    body = big_body(f"evt_big_{uuid.uuid4().hex[:16]}", event_type, customer)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def start_worker(procs, env):
    """A worker, listening, and its horse's memory before any job."""
    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening", explain=worker.log)
    horse = work_horse(worker)
    return worker, horse, memory_mib(horse)


def finished_jobs(settings, name: str | None = None) -> list[Job]:
    """The jobs finished on the live queue, or on the queue named, once none is waiting
    or running there: a job's last commit comes before RQ files it as finished."""
    redis = Redis.from_url(settings.redis_url)
    queue = Queue(name or settings.queue_name, connection=redis, serializer=SERIALIZER)
    wait_for(
        lambda: queue.count == 0 and StartedJobRegistry(queue=queue).count == 0,
        timeout=30,
        message=f"no job waiting or running on {queue.name}",
    )
    ids = FinishedJobRegistry(queue=queue).get_job_ids()
    return [job for job in Job.fetch_many(ids, redis, serializer=SERIALIZER) if job]


def statuses(runtime, ids) -> set[str]:
    with runtime.engine.connect() as connection:
        return set(connection.scalars(select(Event.status).where(Event.id.in_(ids))))


def assert_bounded(worker, horse: int, before: dict[str, float]) -> None:
    assert work_horse(worker) == horse, "the job's horse was replaced"
    after = memory_mib(horse)
    growth = after["peak"] - before["rss"]
    print(
        f"work horse: {before['rss']:.0f} MiB before the job, peak {after['peak']:.0f} MiB "
        f"(+{growth:.0f} MiB), {after['rss']:.0f} MiB after"
    )
    assert growth < GROWTH_BOUND_MIB, (before, after)


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "one_key"])
def test_a_job_of_large_bodies_keeps_the_work_horse_within_its_body_budget(
    client, runtime, proc_settings, procs, keyed
):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    if keyed:
        configure_ordering(runtime, endpoint, policy="fifo")
    env = process_env(proc_settings, HOOKLATCH_WORKER_BODY_BYTES=str(BUDGET_MIB * MIB))
    worker, horse, before = start_worker(procs, env)

    kind = "ordered.big" if keyed else "effect.big"
    ids = [deliver_big(client, endpoint, kind) for _ in range(DELIVERIES)]
    procs("relay", hooklatch_cmd("relay"), env)  # every event stored: one job takes them all
    wait_for(
        lambda: statuses(runtime, ids) == {"processed"},
        timeout=120,
        message="every event processed",
        explain=worker.log,
    )

    assert [sorted(job.args[0]) for job in finished_jobs(proc_settings)] == [sorted(ids)]
    assert_bounded(worker, horse, before)


def test_replays_of_large_bodies_keep_the_work_horse_within_its_body_budget(
    client, runtime, proc_settings, procs
):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [deliver_big(client, endpoint, "effect.big") for _ in range(DELIVERIES)]
    drain(runtime, timeout=120)  # processed here, once: the horse only replays them
    env = process_env(proc_settings, HOOKLATCH_WORKER_BODY_BYTES=str(BUDGET_MIB * MIB))
    worker, horse, before = start_worker(procs, env)

    with runtime.session_factory.begin() as session:  # one after the other, by one horse
        replay_ids = [
            request_replay(session, i, requested_by="test", reason="memory", now=runtime.clock()).id
            for i in ids
        ]
    procs("relay", hooklatch_cmd("relay"), env)
    wait_for(
        lambda: replay_statuses(runtime, replay_ids) == {"succeeded"},
        timeout=120,
        message="every replay run",
        explain=worker.log,
    )

    jobs = finished_jobs(proc_settings, proc_settings.replay_queue_name)
    replayed = sorted(i for job in jobs for i in job.args[1])
    assert replayed == sorted(replay_ids)
    assert_bounded(worker, horse, before)


def replay_statuses(runtime, ids) -> set[str]:
    with runtime.engine.connect() as connection:
        return set(connection.scalars(select(Replay.status).where(Replay.id.in_(ids))))
