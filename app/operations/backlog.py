"""The gauges read from the database for /metrics: outbox rows waiting and the age of the
oldest, pending and dead events, blocked ordering keys, relays and workers alive (by
heartbeat), each destination's forwards waiting and dead and whether it is paused
(hooklatch.operations.forwarding_metrics: by destination name, as the relays' own
forward counts are); and, where the scrape needs the token (the web's), each endpoint's
reconcile (hooklatch.operations.reconcile_metrics), whose labels name endpoints.

A scrape never waits for these queries: it is answered from the last values read, and
when they are older than HOOKLATCH_METRICS_CACHE_SECONDS it starts one refresh in the
background. A refresh that fails keeps the last values and sets
``hooklatch_backlog_up`` to 0, so a database that is away does not fail the scrape; so
does a refresh still waiting after several intervals (a database that stopped answering).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from sqlalchemy import case, func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hooklatch.db import READ_ONLY
from hooklatch.events.models import DEAD, PENDING, Event, OutboxEntry
from hooklatch.operations.forwarding import DestinationSignals, destination_signals
from hooklatch.operations.forwarding_metrics import forwarding_families
from hooklatch.operations.models import Heartbeat
from hooklatch.operations.reconcile_metrics import reconcile_families
from hooklatch.ordering.service import count_blocked
from hooklatch.reconcile.signals import EndpointSignals, read_signals
from hooklatch.runtime import Runtime
from hooklatch.settings import Settings

log = logging.getLogger(__name__)

# Processes whose heartbeat is this many of their own intervals old are not counted alive.
SILENT_BEATS = 3
KINDS = ("relay", "worker")
# A refresh still running after this many cache intervals (a database that stopped
# answering without refusing connections) reports the gauges down.
STALLED_REFRESHES = 6


def kinds(settings: Settings) -> tuple[str, ...]:
    """The kinds of process a deployment must keep alive: relays and workers; on the
    embedded default, the web process's dispatcher thread."""
    return ("dispatcher",) if settings.embedded else KINDS


def beat_alive(
    beat_at: datetime, state: dict[str, Any] | None, now: datetime, every: float
) -> bool:
    """Whether a heartbeat row is recent, by the interval its process beats at (kept in
    its state), else ``every``: a process configured to beat slower is not silent."""
    silent_after = SILENT_BEATS * float((state or {}).get("every", every))
    return (now - beat_at).total_seconds() <= silent_after


@dataclass(frozen=True)
class Backlog:
    outbox_waiting: int
    outbox_oldest_seconds: float
    events_pending: int
    events_dead: int
    alive: dict[str, int]
    blocked_keys: int = 0
    reconcile: tuple[EndpointSignals, ...] = ()
    destinations: tuple[DestinationSignals, ...] = ()


def read_backlog(runtime: Runtime, *, per_endpoint: bool = False) -> Backlog:
    """Small queries on indexed columns, the heartbeats (a row per process), the keyed
    pending events (a partial index), the destinations (a row each) with their pending
    and dead forwards (partial indexes), in one reading transaction; with
    ``per_endpoint``, one more for the reconcile of each endpoint with a credential."""
    now = runtime.clock()
    every = runtime.settings.heartbeat_seconds
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
        beats = connection.execute(select(Heartbeat.kind, Heartbeat.beat_at, Heartbeat.state)).all()
        blocked = count_blocked(connection)
        reconcile = tuple(read_signals(connection)) if per_endpoint else ()
        with Session(bind=connection) as session:  # in the same reading transaction
            forwarding = destination_signals(session, now=now)
    alive = {kind: 0 for kind in kinds(runtime.settings)}
    for kind, beat_at, state in beats:
        if kind in alive and beat_alive(beat_at, state, now, every):
            alive[kind] += 1
    return Backlog(
        outbox_waiting=int(waiting),
        outbox_oldest_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        events_pending=int(statuses.get(PENDING, 0)),
        events_dead=int(statuses.get(DEAD, 0)),
        alive=alive,
        blocked_keys=blocked,
        reconcile=reconcile,
        destinations=forwarding,
    )


class BacklogCollector(Collector):
    """The database gauges, cached; one refresh at a time, in the background. With
    ``per_endpoint``, the reconcile's metrics too: only behind the web's token."""

    def __init__(self, runtime: Runtime, *, per_endpoint: bool = False) -> None:
        self.runtime = runtime
        self.per_endpoint = per_endpoint
        self._lock = threading.Lock()
        self._values: Backlog | None = None
        self._read_at = 0.0  # monotonic time of the last successful read
        self._tried_at: float | None = None  # of the last attempt, successful or not
        self._up = False
        self._refreshing = False
        self._failing = False

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # nothing to read at registration

    def collect(self) -> Iterator[Metric]:
        self._refresh_if_due()
        with self._lock:
            values, up, read_at = self._values, self._up, self._read_at
            stalled = (
                self._refreshing
                and self._tried_at is not None
                and (time.monotonic() - self._tried_at > STALLED_REFRESHES * self._interval)
            )
        up = up and not stalled
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
        yield _gauge(
            "hooklatch_ordering_blocked_keys",
            "Keys of fifo endpoints whose next event cannot run: parked by a dead event, or "
            "failing (hooklatch ordering blocked).",
            values.blocked_keys,
        )
        alive = GaugeMetricFamily(
            "hooklatch_processes_alive",
            "Relays and workers (embedded: dispatchers) whose heartbeat is recent, by kind.",
            labels=["kind"],
        )
        for kind, count in values.alive.items():
            alive.add_metric([kind], count)
        yield alive
        yield from forwarding_families(values.destinations)
        if self.per_endpoint:
            interval = self.runtime.settings.reconcile_interval_seconds
            yield from reconcile_families(values.reconcile, interval=interval)

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
            values = read_backlog(self.runtime, per_endpoint=self.per_endpoint)
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
