"""The RQ job: process a batch of events and replays, each in its own transaction."""

from __future__ import annotations

import logging
import os

from rq import get_current_job
from sqlalchemy.orm import configure_mappers

from app.events.processing import process_events, process_replays
from app.logs import bind
from app.runtime import Runtime
from workers.lease import job_lease

log = logging.getLogger(__name__)


class _State:
    runtime: Runtime | None = None
    pid: int = 0


def install(runtime: Runtime) -> None:
    """Called once by the worker bootstrap; jobs find the runtime here.

    Mappers are configured here, before RQ forks a work horse per job: otherwise every
    work horse configures them again, which costs more than a small job's events.
    """
    configure_mappers()
    _State.runtime = runtime
    _State.pid = os.getpid()


def _runtime() -> Runtime:
    runtime = _State.runtime
    if runtime is None:
        raise RuntimeError("hooklatch jobs run in `hooklatch worker`, which sets up the runtime")
    if _State.pid != os.getpid():
        # A forked work horse must not use the parent's pooled connections.
        runtime.engine.dispose(close=False)
        _State.pid = os.getpid()
    return runtime


def process_batch(event_ids: list[int], replay_ids: list[int] | None = None) -> dict[str, int]:
    runtime = _runtime()
    job = get_current_job()
    job_id = job.id if job else None
    with bind(job_id=job_id), job_lease(runtime.engine, job_id):
        counts = process_events(runtime, event_ids, job_id=job_id)
        counts += process_replays(runtime, replay_ids or (), job_id=job_id)
    log.info("batch done: %s", dict(counts))
    return dict(counts)
