"""Retention in every relay: a thread that runs a cleanup pass, then waits for the next.

No singleton and no cron: relays share the batches (``FOR UPDATE SKIP LOCKED``), so
adding relays adds cleanup capacity, and a relay that dies leaves nothing half done.
A pass keeps going while its batches come back full, so a backlog (after a long
outage, or a shortened clock) is cleared at the rate of the database, not of the
interval.
"""

from __future__ import annotations

import logging
import threading

from hooklatch.jsontypes import JSONObject
from hooklatch.metrics import (
    CLEANUP_BATCH_SECONDS,
    CLEANUP_OLDEST_EXPIRED_SECONDS,
    CLEANUP_ROWS,
    best_effort,
)
from hooklatch.operations.retention import CleanupPass, Retention
from hooklatch.runtime import Runtime
from hooklatch.workers.relay import background

log = logging.getLogger(__name__)


class Cleanup:
    def __init__(self, runtime: Runtime) -> None:
        self.retention = Retention(runtime)
        self.interval = runtime.settings.cleanup_interval_seconds
        self.last: CleanupPass | None = None

    def state(self) -> JSONObject:
        """For the relay's heartbeat: what the last pass did."""
        return {"cleanup": self.last.as_dict()} if self.last else {}

    def run(self, stop: threading.Event) -> None:
        background.repeat(
            stop, lambda: self.once(stop), every=self.interval, what="cleanup pass", logger=log
        )

    def once(self, stop: threading.Event) -> None:
        done = self.retention.once(stop=stop.is_set)
        self.last = done
        with best_effort():
            record(done)
        if done.pruned or done.deleted:
            log.info(
                "cleanup: %d payloads pruned, %d events deleted in %.2f s",
                done.pruned,
                done.deleted,
                done.seconds,
            )

    def start(self, stop: threading.Event) -> threading.Thread:
        return background.start("hooklatch-cleanup", self.run, stop)


def record(done: CleanupPass) -> None:
    for action in (
        "pruned",
        "deleted",
        "deleted_refusals",
        "deleted_heartbeats",
        "deleted_activity",
        "deleted_batches",
        "deleted_audit",
        "deleted_keys",
        "deleted_sessions",
        "deleted_token_failures",
    ):
        CLEANUP_ROWS.labels(action).inc(getattr(done, action))
    for seconds in done.batch_seconds:
        CLEANUP_BATCH_SECONDS.observe(seconds)
    CLEANUP_OLDEST_EXPIRED_SECONDS.set(done.oldest_expired_seconds)
