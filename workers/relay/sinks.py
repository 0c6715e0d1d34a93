"""Where the relay hands work: RQ (production) or this process (the embedded default)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Protocol

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from rq.queue import EnqueueData
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer
from rq.utils import as_text

from hooklatch.db import is_postgres
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.jobs import process_events, process_replays
from hooklatch.workers.worker.lease import leases_held

log = logging.getLogger(__name__)


@dataclass
class Batch:
    event_ids: list[int] = field(default_factory=list)
    replay_ids: list[int] = field(default_factory=list)
    job_id: str = ""


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
    replays: int = 0


class Sink(Protocol):
    def push(self, batches: list[Batch]) -> None:
        """Hand the batches over and set each one's job_id; raise if that failed. A batch
        of replays goes to the replay queue, one of events to the live queue."""

    def after_commit(self, batches: list[Batch]) -> None: ...

    def check(self, job_ids: list[str]) -> Verdicts: ...

    def waiting(self) -> Waiting: ...


JOB_FUNCTION = "hooklatch.workers.worker.jobs.process_batch"
# A job's arguments are lists of ids: JSON carries them, so no worker ever unpickles what
# it finds in Redis (RQ's default, pickle, runs code when it loads a job).
SERIALIZER = JSONSerializer
# Redis keys: when a sweep first saw a job taken off its queue but not started, or
# started without its lease. They outlive two sweep intervals (at least an hour), then
# expire.
SUSPECT_PREFIX = "hooklatch:suspect:"
TAKEN, STARTED = "taken", "started"


class RQSink:
    def __init__(self, runtime: Runtime, redis: Redis) -> None:
        self.runtime = runtime
        self.redis = redis
        settings = runtime.settings
        self.queue = Queue(settings.queue_name, connection=redis, serializer=SERIALIZER)
        # Workers read it after the live queue: a replay never holds up a live event's job.
        self.replay_queue = Queue(
            settings.replay_queue_name, connection=redis, serializer=SERIALIZER
        )
        self._lpos: bool | None = None

    def push(self, batches: list[Batch]) -> None:
        """Both queues' jobs in one pipeline (one round trip)."""
        with self.redis.pipeline() as pipeline:
            for queue in (self.queue, self.replay_queue):
                mine = [b for b in batches if bool(b.replay_ids) == (queue is self.replay_queue)]
                if mine:
                    jobs = queue.enqueue_many([_job_data(b) for b in mine], pipeline=pipeline)
                    for batch, job in zip(mine, jobs, strict=True):
                        batch.job_id = job.id
            pipeline.execute()

    def after_commit(self, batches: list[Batch]) -> None:
        pass

    def waiting(self) -> Waiting:
        # LLEN of each: a worker takes a job off its list.
        with self.redis.pipeline(transaction=False) as pipeline:
            pipeline.llen(self.queue.key)
            pipeline.llen(self.replay_queue.key)
            live, replays = pipeline.execute()
        return Waiting(live=int(live), replays=int(replays))

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
        for queue in (self.queue, self.replay_queue):
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
        """Those still in the list of the queue they were pushed to (live or replays)."""
        if not jobs:
            return set()
        replays = self.replay_queue
        keys = {
            j: replays.key if job.origin == replays.name else self.queue.key
            for j, job in jobs.items()
        }
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


def _job_data(batch: Batch) -> EnqueueData:
    return Queue.prepare_data(
        JOB_FUNCTION,
        args=(batch.event_ids, batch.replay_ids),
        timeout=max(600, 30 * len(batch.event_ids) + 30 * len(batch.replay_ids)),
        result_ttl=3600,
        failure_ttl=7 * 24 * 3600,
    )


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

    def check(self, job_ids: list[str]) -> Verdicts:
        # Work runs synchronously between passes: a row still handed out afterwards was
        # left by a pass that failed, and goes out again.
        return Verdicts()

    def waiting(self) -> Waiting:
        return Waiting()  # each pass's work has run before the next pass


def make_sink(runtime: Runtime) -> RQSink | InlineSink:
    if runtime.settings.redis_url is None:
        return InlineSink(runtime)
    # A hung Redis must not hold the relay's transaction (and the outbox rows a worker
    # waits for) forever: time out, and the pass is retried.
    redis = Redis.from_url(runtime.settings.redis_url, socket_timeout=10, socket_connect_timeout=5)
    return RQSink(runtime, redis)
