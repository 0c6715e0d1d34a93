"""`hooklatch worker`: an RQ worker on hooklatch's queue."""

from __future__ import annotations

import logging

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from rq import Worker
from rq.worker import BaseWorker

from hooklatch.runtime import Runtime
from hooklatch.workers.signals import stop_on_signals
from hooklatch.workers.worker import jobs

log = logging.getLogger(__name__)

MAX_WAIT_SECONDS = 10.0


def run_worker(
    runtime: Runtime, *, burst: bool = False, worker_class: type[BaseWorker] = Worker
) -> bool:
    """Work until SIGTERM or SIGINT (or, with ``burst``, until the queue is empty).

    RQ's worker survives Redis going away while it waits for a job, but quits on a Redis
    error anywhere else: when it is made or starts, or in its periodic maintenance. Such
    a worker is started again after a pause, as the relay retries its passes, rather
    than leaving the queue without a consumer until something restarts the process.
    """
    if runtime.settings.redis_url is None:
        raise SystemExit(
            "hooklatch worker needs REDIS_URL (without it, `hooklatch serve` runs handlers)"
        )
    jobs.install(runtime)
    redis = Redis.from_url(runtime.settings.redis_url)
    failures = 0
    while True:
        try:
            worker = worker_class([runtime.settings.queue_name], connection=redis)
            return bool(worker.work(burst=burst, logging_level="INFO", with_scheduler=False))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            failures += 1
            delay = min(0.5 * 2**failures, MAX_WAIT_SECONDS)
            log.error("Redis unreachable (%s), the worker starts again in %.1f s", exc, delay)
            if stop_on_signals("worker").wait(delay):
                return False
