"""The gauges read from the database for /metrics: outbox rows waiting and the age of the
oldest, pending and dead events, relays and workers alive (by heartbeat).

A scrape never waits for these queries: it is answered from the last values read, and
when they are older than HOOKLATCH_METRICS_CACHE_SECONDS it starts one refresh in the
background. A refresh that fails keeps the last values and sets
``hooklatch_backlog_up`` to 0, so a database that is away does not fail the scrape.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.db import READ_ONLY
from hooklatch.events.models import DEAD, PENDING, Event, OutboxEntry
from hooklatch.operations.models import Heartbeat
from hooklatch.runtime import Runtime

log = logging.getLogger(__name__)

# Processes whose heartbeat is this many intervals old are not counted alive.
SILENT_BEATS = 3
KINDS = ("relay", "worker")


@dataclass(frozen=True)
class Backlog:
    outbox_waiting: int
    outbox_oldest_seconds: float
    events_pending: int
    events_dead: int
    alive: dict[str, int]


def read_backlog(runtime: Runtime) -> Backlog:
    """Four small queries on indexed columns, in one reading transaction."""
    now = runtime.clock()
    silent_after = now - timedelta(seconds=SILENT_BEATS * runtime.settings.heartbeat_seconds)
    connection = runtime.engine.connect().execution_options(**{READ_ONLY: True})
    with connection, connection.begin():
        waiting, oldest = connection.execute(
            select(
                func.coalesce(func.sum(case((OutboxEntry.job_id.is_(None), 1), else_=0)), 0),
                func.min(OutboxEntry.created_at),
            )
        ).one()
        statuses = dict(
            connection.execute(
                select(Event.status, func.count())
                .where(Event.status.in_((PENDING, DEAD)))
                .group_by(Event.status)
            ).all()
        )
        alive = dict(
            connection.execute(
                select(Heartbeat.kind, func.count())
                .where(Heartbeat.beat_at >= silent_after)
                .group_by(Heartbeat.kind)
            ).all()
        )
    return Backlog(
        outbox_waiting=int(waiting),
        outbox_oldest_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        events_pending=int(statuses.get(PENDING, 0)),
        events_dead=int(statuses.get(DEAD, 0)),
        alive={kind: int(alive.get(kind, 0)) for kind in KINDS},
    )


class BacklogCollector(Collector):
    """The database gauges, cached; one refresh at a time, in the background."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._lock = threading.Lock()
        self._values: Backlog | None = None
        self._read_at = 0.0  # monotonic time of the last successful read
        self._tried_at: float | None = None  # of the last attempt, successful or not
        self._up = False
        self._refreshing = False
        self._failing = False

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # nothing to read at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self._refresh_if_due()
        with self._lock:
            values, up, read_at = self._values, self._up, self._read_at
        yield _gauge(
            "hooklatch_backlog_up", "1 if the last read of the database gauges worked.", up
        )
        if values is None:
            return
        yield _gauge(
            "hooklatch_backlog_age_seconds",
            "Seconds since the database gauges were last read.",
            time.monotonic() - read_at,
        )
        yield _gauge(
            "hooklatch_outbox_waiting_rows",
            "Outbox rows not yet handed to a job.",
            values.outbox_waiting,
        )
        yield _gauge(
            "hooklatch_outbox_oldest_age_seconds",
            "Age of the oldest outbox row, handed out or not (0: the outbox is empty).",
            values.outbox_oldest_seconds,
        )
        yield _gauge("hooklatch_events_pending", "Events pending.", values.events_pending)
        yield _gauge("hooklatch_events_dead", "Events dead.", values.events_dead)
        alive = GaugeMetricFamily(
            "hooklatch_processes_alive",
            "Relays and workers whose heartbeat is recent, by kind.",
            labels=["kind"],
        )
        for kind, count in values.alive.items():
            alive.add_metric([kind], count)
        yield alive

    def _refresh_if_due(self) -> None:
        now = time.monotonic()
        with self._lock:
            due = self._tried_at is None or now - self._tried_at >= self._interval
            if not due or self._refreshing:
                return
            self._refreshing, self._tried_at = True, now
        threading.Thread(target=self._refresh, name="metrics-backlog", daemon=True).start()

    @property
    def _interval(self) -> float:
        return self.runtime.settings.metrics_cache_seconds

    def _refresh(self) -> None:
        values: Backlog | None = None
        try:
            values = read_backlog(self.runtime)
        except SQLAlchemyError as exc:
            if not self._failing:  # one line per outage, not per refresh
                log.warning("metrics: reading the database gauges failed: %s", type(exc).__name__)
        finally:
            with self._lock:
                self._refreshing, self._up = False, values is not None
                self._failing = values is None
                if values is not None:
                    self._values, self._read_at = values, time.monotonic()


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=float(value))
