"""Where the relay hands work: what a sink does, and RQ's queues (production).

The other sink, which runs the jobs in the relay's own thread when there is no Redis, is
the embedded default's (``hooklatch.embedded.sinks``): the relay never runs a job itself.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Protocol

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.registry import StartedJobRegistry
from rq.utils import as_text

from hooklatch.db import is_postgres
from hooklatch.jobs import SERIALIZER, Handoff, enqueue_data, queue_name, queue_names
from hooklatch.runtime import Runtime
from hooklatch.workers.lease import leases_held

log = logging.getLogger(__name__)


@dataclass
class Verdicts:
    """What the sink says of the jobs a sweep asks about. A job in none of these sets is
    lost, and its rows are handed out again without counting against them."""

    alive: set[str] = field(default_factory=set)  # queued, or running under its lease
    # Neither, but not for long enough to tell a dead worker from a live one starting the
    # job: the next sweep asks again.
    suspects: set[str] = field(default_factory=set)
    died: set[str] = field(default_factory=set)  # lost, and its process died under it


@dataclass(frozen=True)
class Waiting:
    """Jobs handed over and not yet taken by a worker, on each queue."""

    live: int = 0
    fetched: int = 0
    replays: int = 0


class Sink(Protocol):
    def push(self, handoffs: list[Handoff]) -> None:
        """Hand each one over and set its job_id; raise if that failed. Events go to the
        live queue, those a reconcile fetched to the fetched queue, replays to the replay
        queue (``hooklatch.jobs.queue_name``)."""

    def after_commit(self, handoffs: list[Handoff]) -> None: ...

    def check(self, job_ids: list[str]) -> Verdicts: ...

    def waiting(self) -> Waiting: ...


# Redis keys: when a sweep first saw a job taken off its queue but not started, or
# started without its lease. They outlive two sweep intervals (at least an hour), then
# expire.
SUSPECT_PREFIX = "hooklatch:suspect:"
TAKEN, STARTED = "taken", "started"


class RQSink:
    def __init__(self, runtime: Runtime, redis: Redis) -> None:
        self.runtime = runtime
        self.redis = redis
        # Workers read the fetched and replay queues after the live one: neither a
        # reconcile's catch-up nor a replay holds up a live event's job.
        self.queues = [
            Queue(name, connection=redis, serializer=SERIALIZER)
            for name in queue_names(runtime.settings)
        ]
        self.queue, self.fetched_queue, self.replay_queue = self.queues
        self._lpos: bool | None = None

    @classmethod
    def connect(cls, runtime: Runtime, redis_url: str) -> RQSink:
        # A hung Redis must not hold the relay's transaction (and the outbox rows a worker
        # waits for) forever: time out, and the pass is retried.
        redis = Redis.from_url(redis_url, socket_timeout=10, socket_connect_timeout=5)
        return cls(runtime, redis)

    def push(self, handoffs: list[Handoff]) -> None:
        """Every queue's jobs in one pipeline (one round trip)."""
        settings = self.runtime.settings
        with self.redis.pipeline() as pipeline:
            for queue in self.queues:
                mine = [h for h in handoffs if queue_name(settings, h) == queue.name]
                if mine:
                    jobs = queue.enqueue_many([enqueue_data(h) for h in mine], pipeline=pipeline)
                    for handoff, job in zip(mine, jobs, strict=True):
                        handoff.job_id = job.id
            pipeline.execute()

    def after_commit(self, handoffs: list[Handoff]) -> None:
        pass

    def waiting(self) -> Waiting:
        # LLEN of each: a worker takes a job off its list.
        with self.redis.pipeline(transaction=False) as pipeline:
            for queue in self.queues:
                pipeline.llen(queue.key)
            live, fetched, replays = pipeline.execute()
        return Waiting(live=int(live), fetched=int(fetched), replays=int(replays))

    def check(self, job_ids: list[str]) -> Verdicts:
        """Which of these jobs are still queued or running, and which may be.

        A job is queued while it is in its queue's list, and running while the process
        running it holds its lease. In between, a worker has taken it off the list (RQ
        moves it to an intermediate list, still "queued"), forked a work horse, and RQ
        has marked it started before the job takes its lease: milliseconds, unless the
        worker died there, which leaves a job nobody will ever run. Such a job is a
        suspect; one still a suspect on a later sweep, half a sweep interval or more after
        a sweep first saw it so, is lost. The sighting is kept in Redis, so that every
        relay, and a restarted one, decides alike.

        A job missing from Redis (a restart without persistence), finished, failed or
        stopped is lost too, unless a live process still holds its lease. Of the lost, a
        job whose process died under it (started, or failed with RQ's words for a killed
        work horse or a timeout) counts against its rows.
        """
        for queue in self.queues:
            StartedJobRegistry(queue=queue).cleanup()
        fetched = Job.fetch_many(job_ids, connection=self.redis, serializer=SERIALIZER)
        jobs = dict(zip(job_ids, fetched, strict=True))
        status = {j: job.get_status(refresh=False) if job else None for j, job in jobs.items()}
        queued = self._in_queue(
            {j: job for j, job in jobs.items() if job and status[j] == JobStatus.QUEUED}
        )
        others = [j for j in job_ids if j not in queued]
        leased = self._running(others, status)
        self._forget(leased)
        taken = [j for j in others if j not in leased and status[j] == JobStatus.QUEUED]
        started = [j for j in others if j not in leased and status[j] == JobStatus.STARTED]
        suspects = self._recent(TAKEN, taken) | self._recent(STARTED, started)
        failed = [j for j in others if j not in leased and status[j] == JobStatus.FAILED]
        killed = {j for j in failed if (job := jobs[j]) is not None and _process_died(job)}
        died = (set(started) - suspects) | killed
        return Verdicts(alive=queued | leased, suspects=suspects, died=died)

    def _running(self, job_ids: list[str], status: dict[str, JobStatus | None]) -> set[str]:
        """Those whose lease a live process holds. Without PostgreSQL there are no leases,
        and a started job is taken as running, as RQ says."""
        if not is_postgres(self.runtime.engine):
            return {j for j in job_ids if status[j] == JobStatus.STARTED}
        return leases_held(self.runtime.engine, job_ids)

    def _in_queue(self, jobs: dict[str, Job]) -> set[str]:
        """Those still in the list of the queue they were pushed to."""
        if not jobs:
            return set()
        by_name = {queue.name: queue.key for queue in self.queues}
        keys = {j: by_name.get(job.origin, self.queue.key) for j, job in jobs.items()}
        if not self._has_lpos():
            lists = {
                key: {as_text(j) for j in self.redis.lrange(key, 0, -1)}
                for key in set(keys.values())
            }
            return {j for j, key in keys.items() if j in lists[key]}
        with self.redis.pipeline(transaction=False) as pipeline:
            for job_id, key in keys.items():
                pipeline.lpos(key, job_id)
            positions = pipeline.execute()
        return {j for j, position in zip(keys, positions, strict=True) if position is not None}

    def _has_lpos(self) -> bool:
        """LPOS came with Redis 6.0.6; before it the whole list is read instead."""
        if self._lpos is None:
            version = str(self.redis.info("server").get("redis_version", "0"))
            self._lpos = tuple(int(part) for part in version.split(".")[:3]) >= (6, 0, 6)
        return self._lpos

    def _mark(self, state: str, job_id: str) -> str:
        return f"{SUSPECT_PREFIX}{self.queue.name}:{state}:{job_id}"

    def _recent(self, state: str, job_ids: list[str]) -> set[str]:
        """Those first seen in this state less than half a sweep interval ago (now, for
        those never seen in it before)."""
        if not job_ids:
            return set()
        now = self.runtime.clock().timestamp()
        allowance = self.runtime.settings.sweep_interval_seconds / 2
        with self.redis.pipeline(transaction=True) as pipeline:  # SET and GET at once
            for job_id in job_ids:
                key = self._mark(state, job_id)
                pipeline.set(key, now, nx=True, ex=max(3600, int(4 * allowance)))
                pipeline.get(key)
            replies = pipeline.execute()
        first_seen = [float(seen) for seen in replies[1::2]]
        return {j for j, seen in zip(job_ids, first_seen, strict=True) if now - seen < allowance}

    def _forget(self, job_ids: set[str]) -> None:
        """A job now running under its lease was only starting when a sweep saw it without."""
        if job_ids:
            self.redis.delete(*(self._mark(STARTED, j) for j in job_ids))


def _process_died(job: Job) -> bool:
    """RQ's words for a work horse killed under a job, or a job that ran out of time."""
    text = job.exc_info or ""
    return "Work-horse terminated unexpectedly" in text or "JobTimeoutException" in text
