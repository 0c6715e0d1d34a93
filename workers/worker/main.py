"""`hooklatch worker`: an RQ worker on hooklatch's queue."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from types import FrameType
from typing import Any

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker
from rq.exceptions import StopRequested
from rq.worker import BaseWorker, WorkerStatus
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from hooklatch import metrics
from hooklatch.db import reconnect_delay
from hooklatch.logs import one_line
from hooklatch.operations.heartbeats import start_heartbeat
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.sinks import SERIALIZER
from hooklatch.workers.signals import stop_on_signals
from hooklatch.workers.worker import jobs

log = logging.getLogger(__name__)

# A worker that ran this long before quitting was healthy: its restarts wait from 1 s again.
HEALTHY_SECONDS = 60.0
# A Redis host that does not answer at all must not hold a start, or a stop, for minutes.
CONNECT_TIMEOUT_SECONDS = 5.0


def run_worker(
    runtime: Runtime, *, burst: bool = False, worker_class: type[BaseWorker] = Worker
) -> bool:
    """Work until SIGTERM or SIGINT (or, with ``burst``, until the queue is empty).

    RQ's worker survives Redis going away while it waits for a job, but not elsewhere:
    a Redis error while it is made or starts escapes it, and one in its maintenance, or
    any other error in its loop, makes it log the error and return. Unless a signal
    asked it to stop, such a worker is started again after a pause, as the relay
    retries its passes, rather than leaving the queue without a consumer.
    """
    if runtime.settings.redis_url is None:
        raise SystemExit(
            "hooklatch worker needs REDIS_URL (without it, `hooklatch serve` runs handlers)"
        )
    jobs.install(runtime)
    metrics.serve_worker(runtime.settings.metrics_port)  # its work horses' counts too
    redis = Redis.from_url(
        runtime.settings.redis_url, socket_connect_timeout=CONNECT_TIMEOUT_SECONDS
    )
    current: list[BaseWorker] = []

    def hand_on(signum: int, frame: FrameType | None) -> None:
        # A signal between RQ's start and its own handlers: RQ stops as if it had it.
        if current:
            current[0].request_stop(signum, frame)

    # Ours until RQ installs its own handlers, and again whenever RQ's loop has ended.
    stop = stop_on_signals("worker", then=hand_on)
    # A burst run ends when the queue is empty, not when the database comes back.
    if not burst and not _database_answers(runtime, stop):
        return False
    # The work horses, forked from this process, do not inherit the thread.
    beat_stop = threading.Event()
    beating = None if burst else start_heartbeat(runtime, "worker", beat_stop)
    try:
        failures = 0
        while not stop.is_set():
            worker: BaseWorker | None = None
            started = time.monotonic()
            error: Exception | None = None
            worked = False
            try:
                worker = stoppable(worker_class)(
                    [runtime.settings.queue_name], connection=redis, serializer=SERIALIZER
                )
                worker.stop_seconds = runtime.settings.worker_stop_seconds  # type: ignore[attr-defined]
                if stop.is_set():
                    break
                current[:] = [worker]
                worked = bool(
                    worker.work(burst=burst, logging_level="WARNING", with_scheduler=False)
                )
            except (RedisConnectionError, RedisTimeoutError) as exc:
                error = exc
            except StopRequested:  # raised by RQ's request_stop, outside RQ's loop
                break
            finally:
                current.clear()
                stop_on_signals("worker", stop, then=hand_on)
            if stop.is_set() or _asked_to_stop(worker) or (burst and error is None):
                return worked
            failures = 1 if time.monotonic() - started > HEALTHY_SECONDS else failures + 1
            delay = reconnect_delay(failures)
            if error is not None:
                log.error("Redis unreachable (%s), the worker starts again in %.1f s", error, delay)
            else:
                log.error("RQ's worker quit on its own (see above), restarting in %.1f s", delay)
            if stop.wait(delay):
                break
        return False
    finally:
        beat_stop.set()
        if beating is not None:
            beating.join(timeout=10)


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


def stoppable(worker_class: type[BaseWorker]) -> type[BaseWorker]:
    """``worker_class`` that stops in bounded time once asked to.

    Idle: RQ's signal handler raises StopRequested wherever the worker is. While Redis is
    away RQ logs each failed retry, and a StopRequested raised inside that log call is
    swallowed by logging (an exception in a handler is reported, not raised): RQ then
    retried for ever and SIGTERM did not stop the worker. Each retry begins with a
    heartbeat; there, a stop already taken by an idle worker is raised again.

    Busy: RQ's warm shutdown waits for the whole job, up to a thousand events. The job is
    told to stop after the chunk under way (in the work horse, by a SIGTERM it now
    catches; in this process, for a worker that does not fork), and a horse still at work
    ``stop_seconds`` later is killed.
    """

    made = _STOPPABLE.get(worker_class)
    if made is None:

        def heartbeat(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _asked_to_stop(self) and self.get_state() != WorkerStatus.BUSY:
                raise StopRequested()
            return worker_class.heartbeat(self, *args, **kwargs)

        def setup_work_horse_signals(self: Any) -> None:
            # As RQ's, except SIGTERM (RQ: the default, death wherever the horse is).
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, lambda signum, frame: jobs.stop_between_chunks())
            signal.siginterrupt(signal.SIGTERM, False)  # a handler's system calls go on

        def handle_warm_shutdown_request(self: Any) -> None:
            worker_class.handle_warm_shutdown_request(self)
            jobs.stop_between_chunks()  # a SimpleWorker's job runs in this process
            horse, job_id = self.horse_pid, self.get_current_job_id()
            if horse:
                with contextlib.suppress(ProcessLookupError):  # it has just ended
                    os.kill(horse, signal.SIGTERM)
                timer = threading.Timer(self.stop_seconds, _cut_short, args=(self, horse, job_id))
                timer.daemon = True
                timer.start()

        def bootstrap(self: Any, *args: Any, **kwargs: Any) -> None:
            # RQ's own start-up lines are below the WARNING level the worker runs at.
            worker_class.bootstrap(self, *args, **kwargs)
            log.info(
                "worker listening on queue %s (pid %d)", ", ".join(self.queue_names()), os.getpid()
            )

        made = type(
            worker_class.__name__,
            (worker_class,),
            {
                "bootstrap": bootstrap,
                "heartbeat": heartbeat,
                "setup_work_horse_signals": setup_work_horse_signals,
                "handle_warm_shutdown_request": handle_warm_shutdown_request,
                "stop_seconds": 20.0,
            },
        )
        _STOPPABLE[worker_class] = made
    return made


def _cut_short(worker: BaseWorker, horse: int, job_id: str | None) -> None:
    """The horse still works ``stop_seconds`` after the stop: its chunk rolls back.

    The job is recorded as stopped, not as a horse that died: the relay's sweep then hands
    its rows out again without counting a lost dispatch against events that a stop, not
    their handlers, cut short (a handler that never ends still meets the job timeout).
    """
    if worker.horse_pid == horse:
        log.warning("the job's chunk is still running: stopping its work horse now")
        worker._stopped_job_id = job_id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(horse, signal.SIGKILL)  # the horse leads its own group (RQ)


_STOPPABLE: dict[type[BaseWorker], type[BaseWorker]] = {}


def _asked_to_stop(worker: BaseWorker | None) -> bool:
    """Whether RQ's signal handler took a SIGTERM or SIGINT meant for this worker."""
    return worker is not None and getattr(worker, "_shutdown_requested_date", None) is not None
