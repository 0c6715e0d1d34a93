"""`hooklatch worker`: an RQ worker on hooklatch's queue."""

from __future__ import annotations

from redis import Redis
from rq import Worker
from rq.worker import BaseWorker

from hooklatch.runtime import Runtime
from hooklatch.workers.worker import jobs


def run_worker(
    runtime: Runtime, *, burst: bool = False, worker_class: type[BaseWorker] = Worker
) -> bool:
    if runtime.settings.redis_url is None:
        raise SystemExit(
            "hooklatch worker needs REDIS_URL (without it, `hooklatch serve` runs handlers)"
        )
    jobs.install(runtime)
    redis = Redis.from_url(runtime.settings.redis_url)
    worker = worker_class([runtime.settings.queue_name], connection=redis)
    return bool(worker.work(burst=burst, logging_level="INFO", with_scheduler=False))
