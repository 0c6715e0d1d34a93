"""`hooklatch worker`: an RQ worker on hooklatch's queues (live events first, then events a
reconcile fetched, then replays), in a long-lived work horse."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq.exceptions import StopRequested
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from hooklatch import metrics
from hooklatch.db import reconnect_delay
from hooklatch.jobs import SERIALIZER, queue_names
from hooklatch.logs import one_line
from hooklatch.operations.heartbeats import start_heartbeat
from hooklatch.runtime import Runtime
from hooklatch.workers.signals import stop_on_signals
from hooklatch.workers.worker import jobs
from hooklatch.workers.worker.horse import (
    DIED,
    DONE,
    QUIT,
    RECYCLED,
    REDIS,
    STOPPED,
    HorseForker,
    Outcome,
)
from hooklatch.workers.worker.rq_workers import (
    HooklatchWorker,
    SimpleHooklatchWorker,
    asked_to_stop,
)

log = logging.getLogger(__name__)

# A worker that ran this long before quitting was healthy: its restarts wait from 1 s again.
HEALTHY_SECONDS = 60.0
# A Redis host that does not answer at all must not hold a start, or a stop, for minutes.
CONNECT_TIMEOUT_SECONDS = 5.0


def run_worker(
    runtime: Runtime,
    *,
    burst: bool = False,
    simple: bool = False,
    worker_class: type[HooklatchWorker] = SimpleHooklatchWorker,
) -> bool:
    """Work until SIGTERM or SIGINT (or, with ``burst``, until the queue is empty).

    ``worker_class`` (one that runs jobs in its own process) runs in a long-lived work
    horse that this process forks and watches (workers/worker/horse.py); with ``simple``,
    in this process. RQ's worker survives Redis going away while it waits for a job, but
    not elsewhere: a Redis error while it is made or starts escapes it, and one in its
    maintenance, or any other error in its loop, makes it log the error and return.
    Unless a signal asked it to stop, it is started again after a pause, as the relay
    retries its passes, rather than leaving the queue without a consumer; so is a horse
    that died.
    """
    redis_url = runtime.settings.redis_url
    if redis_url is None:
        raise SystemExit(
            "hooklatch worker needs REDIS_URL (without it, `hooklatch serve` runs handlers)"
        )
    jobs.install(runtime)
    metrics.serve_worker(  # its work horses' counts too
        runtime.settings.worker_metrics_port,
        address=runtime.settings.metrics_address,
        setting="HOOKLATCH_WORKER_METRICS_PORT",
    )
    redis = Redis.from_url(redis_url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS)
    loops = WorkLoops(runtime, redis, worker_class, burst=burst)
    # Ours until RQ installs its own handlers, and again whenever RQ's loop has ended. In
    # this process, a stop is passed on to the horse by its forker (a thread, not here).
    stop_on_signals("worker", loops.stop, then=loops.hand_on)
    # A burst run ends when the queue is empty, not when the database comes back.
    if not burst and not _database_answers(runtime, loops.stop):
        return False
    if not simple:
        loops.forker = HorseForker(redis_url, loops.stop, runtime.settings.worker_stop_seconds)
        loops.max_jobs = runtime.settings.worker_max_jobs
    # The horses, forked from this process, do not inherit the thread.
    beat_stop = threading.Event()
    beating = None if burst else start_heartbeat(runtime, "worker", beat_stop)
    try:
        run = loops.forker.run if loops.forker else _call
        return _keep_working(loops.stop, run, loops.once)
    finally:
        beat_stop.set()
        if beating is not None:
            beating.join(timeout=10)


@dataclass
class WorkLoops:
    """RQ workers' loops, one after the other (``once``: in the horse, or in this
    process), and the stop that signals set (``stop``), passed on to the one running."""

    runtime: Runtime
    redis: Redis
    worker_class: type[HooklatchWorker]
    burst: bool = False
    forker: HorseForker | None = None  # None: in this process
    max_jobs: int | None = None  # a horse's share of jobs
    stop: threading.Event = field(default_factory=threading.Event)
    current: HooklatchWorker | None = None

    def hand_on(self, signum: int, frame: FrameType | None) -> None:
        """A signal between RQ's start and its own handlers: RQ stops as if it had it."""
        if self.current is not None:
            self.current.request_stop(signum, frame)  # type: ignore[no-untyped-call]  # RQ's

    def once(self) -> Outcome:
        """One RQ worker's loop, to its end."""
        try:
            queues = queue_names(self.runtime.settings)  # the live queue first
            worker = self.worker_class(queues, connection=self.redis, serializer=SERIALIZER)
            worker.forker = self.forker
            self.current = worker  # from here, a signal is passed on to RQ (hand_on)
            if self.stop.is_set():  # taken before: RQ would never hear of it
                return Outcome(STOPPED)
            worked = bool(
                worker.work(
                    burst=self.burst,
                    logging_level="WARNING",
                    with_scheduler=False,
                    max_jobs=self.max_jobs,
                )
            )
        except (RedisConnectionError, RedisTimeoutError) as exc:
            return Outcome(REDIS, error=one_line(exc))
        except StopRequested:  # raised by RQ's request_stop, outside RQ's loop
            return Outcome(STOPPED)
        finally:
            self.current = None
            stop_on_signals("worker", self.stop, then=self.hand_on)
        return self._ended(worker, worked)

    def _ended(self, worker: HooklatchWorker, worked: bool) -> Outcome:
        """Why RQ's loop returned."""
        done = worker.jobs_done
        if self.stop.is_set() or asked_to_stop(worker):
            return Outcome(STOPPED, worked, done)
        if self.burst:
            return Outcome(DONE, worked, done)
        if self.max_jobs is not None and done >= self.max_jobs:
            return Outcome(RECYCLED, worked, done)
        return Outcome(QUIT, worked, done)


def _call(work: Callable[[], Outcome]) -> Outcome:
    return work()


def _keep_working(
    stop: threading.Event,
    run: Callable[[Callable[[], Outcome]], Outcome],
    work: Callable[[], Outcome],
) -> bool:
    """Run ``work`` (in a horse, or here) until a stop, starting it again when it ends
    for any other reason: at once for a horse that ran its share of jobs, after a pause
    that grows with repeated failures otherwise."""
    failures = 0
    worked = False
    while not stop.is_set():
        started = time.monotonic()
        outcome = run(work)
        worked = worked or outcome.worked
        if stop.is_set() or outcome.kind in (STOPPED, DONE):
            return worked
        if outcome.kind == RECYCLED:
            log.info("work horse replaced after %d jobs", outcome.jobs)
            failures = 0
            continue
        failures = 1 if time.monotonic() - started > HEALTHY_SECONDS else failures + 1
        delay = reconnect_delay(failures)
        if outcome.kind == REDIS:
            log.error(
                "Redis unreachable (%s), the worker starts again in %.1f s", outcome.error, delay
            )
        elif outcome.kind == DIED:
            log.error("the work horse died (%s), another starts in %.1f s", outcome.error, delay)
        else:
            log.error("RQ's worker quit on its own (see above), restarting in %.1f s", delay)
        if stop.wait(delay):
            break
    return worked


def _database_answers(runtime: Runtime, stop: threading.Event) -> bool:
    """Wait until the database answers (False: a stop came first). A job taken while it
    is away could only fail, and its events would wait for the relay's sweep."""
    failures = 0
    while not stop.is_set():
        try:
            with runtime.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            runtime.engine.dispose()  # the work horses open their own
            if failures:
                log.info("database reachable, the worker starts")
            return True
        except SQLAlchemyError as exc:
            failures += 1
            delay = reconnect_delay(failures)
            log.error("database unreachable (%s), trying again in %.1f s", one_line(exc), delay)
            stop.wait(delay)
    return False
