"""Where the relay hands work: RQ (production) or this process (the embedded default)."""

from __future__ import annotations

import logging
import uuid

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry

from app.events.processing import process_events, process_replays
from app.runtime import Runtime
from workers.lease import leases_held
from workers.relay import Batch

log = logging.getLogger(__name__)

JOB_FUNCTION = "workers.jobs.process_batch"
WAITING = {JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


class RQSink:
    def __init__(self, runtime: Runtime, redis: Redis) -> None:
        self.runtime = runtime
        self.redis = redis
        self.queue = Queue(runtime.settings.queue_name, connection=redis)

    def push(self, batches: list[Batch]) -> None:
        datas = [
            Queue.prepare_data(
                JOB_FUNCTION,
                args=(batch.event_ids, batch.replay_ids),
                timeout=max(600, 30 * len(batch.event_ids) + 30 * len(batch.replay_ids)),
                result_ttl=3600,
                failure_ttl=7 * 24 * 3600,
            )
            for batch in batches
        ]
        with self.redis.pipeline() as pipeline:
            jobs = self.queue.enqueue_many(datas, pipeline=pipeline)
            pipeline.execute()
        for batch, job in zip(batches, jobs, strict=True):
            batch.job_id = job.id

    def after_commit(self, batches: list[Batch]) -> None:
        pass

    def in_flight(self, job_ids: list[str]) -> set[str]:
        return self.check(job_ids)[0]

    def check(self, job_ids: list[str]) -> tuple[set[str], set[str]]:
        """(still queued or running, died while running). A job missing from Redis (a
        restart without persistence) or one that finished is neither: its work is sent
        again without counting against the events in it."""
        StartedJobRegistry(queue=self.queue).cleanup()
        jobs = Job.fetch_many(job_ids, connection=self.redis)
        alive, started, died = set(), [], set()
        for job_id, job in zip(job_ids, jobs, strict=True):
            status = job.get_status(refresh=False) if job else None
            if status in WAITING:
                alive.add(job_id)
            elif status == JobStatus.STARTED:
                started.append(job_id)
            elif job is not None and status == JobStatus.FAILED and _process_died(job):
                died.add(job_id)
        # A started job is alive only while the process running it holds its lease.
        holding = leases_held(self.runtime.engine, started)
        return alive | holding, died | (set(started) - holding)


def _process_died(job: Job) -> bool:
    """RQ's words for a work horse killed under a job, or a job that ran out of time."""
    text = job.exc_info or ""
    return "Work-horse terminated unexpectedly" in text or "JobTimeoutException" in text


class InlineSink:
    """Runs the batches in this process after the outbox commit (no Redis)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def push(self, batches: list[Batch]) -> None:
        for batch in batches:
            batch.job_id = f"inline-{uuid.uuid4()}"

    def after_commit(self, batches: list[Batch]) -> None:
        for batch in batches:
            process_events(self.runtime, batch.event_ids, job_id=batch.job_id)
            process_replays(self.runtime, batch.replay_ids, job_id=batch.job_id)

    def in_flight(self, job_ids: list[str]) -> set[str]:
        return set()  # work runs synchronously: nothing is in flight between passes

    def check(self, job_ids: list[str]) -> tuple[set[str], set[str]]:
        return set(), set()


def make_sink(runtime: Runtime) -> RQSink | InlineSink:
    if runtime.settings.redis_url is None:
        return InlineSink(runtime)
    # A hung Redis must not hold the relay's transaction (and the outbox rows a worker
    # waits for) forever: time out, and the pass is retried.
    redis = Redis.from_url(runtime.settings.redis_url, socket_timeout=10, socket_connect_timeout=5)
    return RQSink(runtime, redis)
