"""Hourly activity per endpoint: what the console's overview and chart show.

Deliveries are counted by outcome (accepted, duplicate, handshake, each refusal reason)
in each web process's memory and written every few seconds by a background thread
(``ActivityCounter``): an upsert per endpoint, hour and outcome, never a write per
request. The same flush records when each secret last verified a delivery. Workers add
what happened to events (processed, ignored, failed attempts, dead) once the chunk that
did it has committed, in a short transaction of their own, so that a chunk rolled back
counts nothing and no chunk holds a counter row while it runs.

A failed attempt is counted in the hour it failed; how an event ended (processed,
ignored, dead) in the hour it was received, like its ``accepted``: so the events
accepted in a window are the ones that ended in it plus those still pending, and the
overview's columns add up (replays are not counted: an event is counted once, by how
its own run ended).

Counts a process holds when it is killed are lost: the overview is for people, the
events table stays the record, and /metrics counts the same deliveries for alerting.
"""

from __future__ import annotations

import atexit
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    ForeignKey,
    String,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from hooklatch.db import Base, UTCDateTime
from hooklatch.endpoints.models import EndpointSecret
from hooklatch.events.models import DEAD, IGNORED, PENDING, PROCESSED, Event
from hooklatch.logs import Outage

# Logged under the name it had in operations, which log filters may already select.
log = logging.getLogger("hooklatch.operations.activity")

FAILED = "failed"  # an attempt that failed, retried or not
# An event's status after an attempt: whether the attempt failed (a pending event after
# an attempt is one whose attempt failed and will be retried), and how the event ended.
_FAILED_AFTER = (DEAD, PENDING)
ENDED = (PROCESSED, IGNORED, DEAD)
OUTCOME_LENGTH = 64


class ActivityCount(Base):
    """What happened to an endpoint's deliveries and events in one hour, by outcome:
    accepted, duplicate, each refusal reason (counted by the web processes), processed,
    ignored, failed (an attempt), dead (counted by the workers). Written in batches by
    each process; the console's overview and chart read it. Retention deletes hours
    older than the dedupe clock."""

    __tablename__ = "activity"

    hour: Mapped[datetime] = mapped_column(UTCDateTime, primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    outcome: Mapped[str] = mapped_column(String(64), primary_key=True)
    count: Mapped[int] = mapped_column(BigInteger, default=0)


# One statement for both databases: an endpoint deleted since its deliveries were counted
# is skipped (the SELECT finds no row) instead of failing the whole flush.
_UPSERT = text(
    "INSERT INTO activity (hour, endpoint_id, outcome, count) "
    "SELECT :hour, id, :outcome, :count FROM endpoints WHERE id = :endpoint_id "
    "ON CONFLICT (hour, endpoint_id, outcome) "
    "DO UPDATE SET count = activity.count + excluded.count"
).bindparams(bindparam("hour", type_=UTCDateTime()))


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


Counts = Counter[tuple[datetime, str, str]]  # (hour, endpoint id, outcome) -> count


def add_counts(
    connection: Connection | Session, counts: Counter[tuple[datetime, str, str]]
) -> None:
    rows = [
        {"hour": hour, "endpoint_id": endpoint, "outcome": outcome[:OUTCOME_LENGTH], "count": n}
        for (hour, endpoint, outcome), n in sorted(counts.items())
        if n
    ]
    if rows:
        connection.execute(_UPSERT, rows)


def count_attempts(
    connection: Connection | Session,
    events: Iterable[tuple[str, str, datetime]],
    *,
    now: datetime,
) -> None:
    """After a worker's chunk committed: each (endpoint id, status after the attempt,
    when the event was received). A failure counts in this hour, an ending in the hour
    the event was received."""
    counts: Counts = Counter()
    for endpoint_id, status, received_at in events:
        if status in _FAILED_AFTER:
            counts[(hour_of(now), endpoint_id, FAILED)] += 1
        if status in ENDED:
            counts[(hour_of(received_at), endpoint_id, status)] += 1
    add_counts(connection, counts)


class ActivityCounter:
    """One web process's delivery counts and secret sightings, written every
    ``interval`` seconds by a thread started with the first count (never in a gunicorn
    master that forks its workers later), and at exit."""

    def __init__(
        self, connect: Callable[[], AbstractContextManager[Connection]], *, interval: float
    ) -> None:
        self.connect = connect
        self.interval = max(interval, 0.5)
        self._counts: Counts = Counter()
        self._verified: dict[tuple[str, str], datetime] = {}
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def add(
        self, endpoint_id: str, outcome: str, *, now: datetime, fingerprint: str | None
    ) -> None:
        with self._lock:
            self._counts[(hour_of(now), endpoint_id, outcome)] += 1
            if fingerprint is not None:
                self._verified[(endpoint_id, fingerprint)] = now
            if self._thread is None:
                self._start()

    def flush(self) -> None:
        with self._flushing:  # one at a time: close() waits for the thread's
            self._flush()

    def _flush(self) -> None:
        with self._lock:
            counts, self._counts = self._counts, Counter()
            verified, self._verified = self._verified, {}
        if not counts and not verified:
            return
        try:
            with self.connect() as connection:  # a transaction: all or nothing
                add_counts(connection, counts)
                _mark_verified(connection, verified)
        except Exception:
            with self._lock:  # kept for the next flush
                self._counts.update(counts)
                for key, at in verified.items():
                    self._verified[key] = max(at, self._verified.get(key, at))
            raise

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        try:
            self.flush()
        except Exception as exc:  # the process is ending: say what is lost, once
            log.warning("activity counts not written at exit: %s", type(exc).__name__)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hooklatch-activity", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _run(self) -> None:
        outage = Outage(log, "writing activity counts")
        while not self._closing.is_set():
            self._wake.wait(self.interval)
            try:
                self.flush()
                outage.ok()
            except Exception as exc:
                outage.failed(exc, self.interval)


def _mark_verified(connection: Connection, verified: dict[tuple[str, str], datetime]) -> None:
    for (endpoint_id, fingerprint), at in sorted(verified.items()):
        connection.execute(
            update(EndpointSecret)
            .where(
                EndpointSecret.endpoint_id == endpoint_id,
                EndpointSecret.fingerprint == fingerprint,
                or_(
                    EndpointSecret.last_verified_at.is_(None), EndpointSecret.last_verified_at < at
                ),
            )
            .values(last_verified_at=at)
        )


def overview(session: Session, *, now: datetime, hours: int = 24) -> dict[str, Any]:
    """Per endpoint, the last ``hours``: counts by outcome, and what waits now (pending
    events and the oldest's age, dead events; ``pending_recent``: the pending events
    received in those hours, which have not ended yet)."""
    since = hour_of(now) - timedelta(hours=hours - 1)
    by_endpoint: dict[str, dict[str, int]] = {}
    for endpoint_id, outcome, n in session.execute(
        select(ActivityCount.endpoint_id, ActivityCount.outcome, func.sum(ActivityCount.count))
        .where(ActivityCount.hour >= since)
        .group_by(ActivityCount.endpoint_id, ActivityCount.outcome)
    ):
        by_endpoint.setdefault(endpoint_id, {})[outcome] = int(n)
    waiting: dict[str, dict[str, Any]] = {}
    for endpoint_id, status, n, recent, oldest in session.execute(
        select(
            Event.endpoint_id,
            Event.status,
            func.count(),
            func.count().filter(Event.received_at >= since),
            func.min(Event.received_at),
        )
        .where(Event.status.in_((PENDING, DEAD)))
        .group_by(Event.endpoint_id, Event.status)
    ):
        entry = waiting.setdefault(
            endpoint_id, {"pending": 0, "dead": 0, "oldest_pending": None, "pending_recent": 0}
        )
        entry[status] = int(n)
        if status == PENDING:
            entry["oldest_pending"], entry["pending_recent"] = oldest, int(recent)
    return {"since": since, "counts": by_endpoint, "waiting": waiting}


def series(session: Session, *, now: datetime, hours: int = 24) -> list[dict[str, Any]]:
    """Each of the last ``hours`` hours, oldest first: deliveries stored (accepted and
    duplicates) and failures (refusals and failed attempts), all endpoints together."""
    since = hour_of(now) - timedelta(hours=hours - 1)
    volume, failures = Counter[datetime](), Counter[datetime]()
    for hour, outcome, n in session.execute(
        select(ActivityCount.hour, ActivityCount.outcome, func.sum(ActivityCount.count))
        .where(ActivityCount.hour >= since)
        .group_by(ActivityCount.hour, ActivityCount.outcome)
    ):
        if outcome in ("accepted", "duplicate"):
            volume[hour] += int(n)
        elif outcome not in (PROCESSED, IGNORED, DEAD, "handshake"):
            failures[hour] += int(n)
    hours_shown = [since + timedelta(hours=h) for h in range(hours)]
    return [
        {"hour": hour, "deliveries": volume[hour], "failures": failures[hour]}
        for hour in hours_shown
    ]


def delete_before(session: Session, cutoff: datetime) -> int:
    result = session.execute(delete(ActivityCount).where(ActivityCount.hour < hour_of(cutoff)))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
