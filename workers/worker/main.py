"""`hooklatch worker` and `hooklatch relay`: the two long-running processes besides web."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from redis import Redis
from rq import SimpleWorker, Worker

from app.runtime import Runtime
from workers import jobs
from workers.relay import Relay
from workers.sinks import make_sink

log = logging.getLogger(__name__)


def run_worker(runtime: Runtime, *, burst: bool = False, fork: bool = True) -> bool:
    if runtime.settings.redis_url is None:
        raise SystemExit(
            "hooklatch worker needs REDIS_URL (without it, `hooklatch serve` runs handlers)"
        )
    jobs.install(runtime)
    redis = Redis.from_url(runtime.settings.redis_url)
    worker_class = Worker if fork else SimpleWorker
    worker = worker_class([runtime.settings.queue_name], connection=redis)
    return bool(worker.work(burst=burst, logging_level="INFO", with_scheduler=False))


def run_relay(runtime: Runtime) -> None:
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("relay stopping (signal %d)", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("relay started")
    Relay(runtime, make_sink(runtime)).run(stop)
