"""Retention: two clocks that bound storage without shortening the dedupe window.

- After the payload clock, a processed or ignored event's body and headers are deleted.
  Its row stays, with its dedupe key, SHA-256 and history: a late retry is still
  answered ``duplicate``. Pending and dead events keep their payload.
- After the dedupe clock (never shorter than an installed provider's retry window,
  checked at start), the event row goes, with its attempts and replays. A delivery of
  that id afterwards is a new event: by then the provider has stopped retrying it.

Neither clock touches an event with work in hand (a pending status or an outbox row),
and every batch claims its rows with ``FOR UPDATE SKIP LOCKED``: any number of relays
share the work without waiting for each other, for a worker, or for ingest. Refusal
counts follow the dedupe clock by their last refusal; heartbeats go after a silent day;
console sessions and failed admin-token attempts go once they have expired.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    delete,
    exists,
    func,
    null,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased
from sqlalchemy.sql.elements import BindParameter

from hooklatch.audit import AuditEntry
from hooklatch.db import Base
from hooklatch.endpoints.models import Refusal
from hooklatch.events.activity import ActivityCount, hour_of
from hooklatch.events.activity import delete_before as delete_activity_before
from hooklatch.events.bulk_replays import RUNNING
from hooklatch.events.models import (
    IGNORED,
    PENDING,
    PROCESSED,
    BulkReplay,
    Event,
    OutboxEntry,
    Replay,
)
from hooklatch.forwarding.models import DEAD as FORWARD_DEAD
from hooklatch.forwarding.models import PENDING as FORWARD_PENDING
from hooklatch.forwarding.models import Forward
from hooklatch.operations.models import (
    ConsoleSession,
    Heartbeat,
    TokenFailures,
)
from hooklatch.ordering.models import OrderingKey
from hooklatch.runtime import Runtime

HEARTBEAT_RETENTION = timedelta(days=1)
# On SQLite, how often a pass refreshes the planner's statistics of the events table.
SQLITE_STATS_SECONDS = 3600.0


@dataclass
class CleanupPass:
    """What one pass did (or, dry, would do)."""

    pruned: int = 0
    deleted: int = 0
    deleted_refusals: int = 0
    deleted_heartbeats: int = 0
    # The console's side tables: hourly activity and finished bulk replays (dedupe
    # clock), audit entries (their own clock).
    deleted_activity: int = 0
    deleted_batches: int = 0
    deleted_audit: int = 0
    # Keys whose stale-guard position nobody has touched for the dedupe clock: any event
    # older than it is past every provider's retries. A key parked by a dead event stays.
    deleted_keys: int = 0
    # Console sessions past their expiry, and failed admin-token attempts whose window
    # and lockout are over.
    deleted_sessions: int = 0
    deleted_token_failures: int = 0
    batches: int = 0
    seconds: float = 0.0
    # How far past its clock the oldest row left behind is (0 when none is): grows when
    # cleanup falls behind ingest.
    oldest_expired_seconds: float = 0.0
    finished_at: datetime | None = None
    dry_run: bool = False
    batch_seconds: list[float] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        del data["batch_seconds"]
        data["finished_at"] = self.finished_at.isoformat() if self.finished_at else None
        return data


class Retention:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self._stats_at: float | None = None  # monotonic time of the last SQLite ANALYZE

    def cutoffs(self, now: datetime) -> tuple[datetime, datetime]:
        """(payload cutoff, dedupe cutoff): events received before them have expired."""
        return (
            now - timedelta(days=self.settings.payload_retention_days),
            now - timedelta(days=self.settings.dedupe_retention_days),
        )

    def once(self, *, dry_run: bool = False, stop: Callable[[], bool] | None = None) -> CleanupPass:
        """Batches until nothing expired is left (or ``stop()`` says to end early)."""
        now = self.runtime.clock()
        payload_cutoff, dedupe_cutoff = self.cutoffs(now)
        audit_cutoff = now - timedelta(days=self.settings.audit_retention_days)
        result = CleanupPass(dry_run=dry_run)
        started = time.monotonic()
        if dry_run:
            with self.runtime.session_factory() as session:
                result.pruned = _count(session, Event, _prunable(payload_cutoff))
                result.deleted = _count(session, Event, _deletable(dedupe_cutoff))
                result.deleted_refusals = _count(session, Refusal, Refusal.last_at < dedupe_cutoff)
                result.deleted_heartbeats = _count(
                    session, Heartbeat, Heartbeat.beat_at < now - HEARTBEAT_RETENTION
                )
                result.deleted_activity = _count(
                    session, ActivityCount, ActivityCount.hour < hour_of(dedupe_cutoff)
                )
                result.deleted_batches = _count(session, BulkReplay, _old_batch(dedupe_cutoff))
                result.deleted_audit = _count(session, AuditEntry, AuditEntry.at < audit_cutoff)
                result.deleted_keys = _count(session, OrderingKey, _idle_key(dedupe_cutoff))
                result.deleted_sessions = _count(
                    session, ConsoleSession, ConsoleSession.expires_at < now
                )
                result.deleted_token_failures = _count(
                    session, TokenFailures, TokenFailures.expires_at < now
                )
        else:
            steps = (
                ("deleted", lambda s: self._delete_events(s, dedupe_cutoff)),
                ("pruned", lambda s: self._prune_payloads(s, payload_cutoff)),
                (
                    "deleted_refusals",
                    lambda s: self._delete_by_key(
                        s,
                        Refusal,
                        (Refusal.endpoint_id, Refusal.reason),
                        Refusal.last_at < dedupe_cutoff,
                    ),
                ),
                (
                    "deleted_keys",
                    lambda s: self._delete_by_key(
                        s,
                        OrderingKey,
                        (OrderingKey.endpoint_id, OrderingKey.key),
                        _idle_key(dedupe_cutoff),
                    ),
                ),
                ("deleted_heartbeats", lambda s: _delete_heartbeats(s, now)),
                ("deleted_activity", lambda s: delete_activity_before(s, dedupe_cutoff)),
                (
                    "deleted_batches",
                    lambda s: _delete_where(s, BulkReplay, _old_batch(dedupe_cutoff)),
                ),
                (
                    "deleted_audit",
                    lambda s: _delete_where(s, AuditEntry, AuditEntry.at < audit_cutoff),
                ),
                (
                    "deleted_sessions",
                    lambda s: _delete_where(s, ConsoleSession, ConsoleSession.expires_at < now),
                ),
                (
                    "deleted_token_failures",
                    lambda s: _delete_where(s, TokenFailures, TokenFailures.expires_at < now),
                ),
            )
            for name, step in steps:
                while True:
                    if stop is not None and stop():  # between two batches: nothing half done
                        result.seconds = time.monotonic() - started
                        return result
                    batch_started = time.monotonic()
                    with self.runtime.session_factory.begin() as session:
                        done = step(session)
                    result.batch_seconds.append(time.monotonic() - batch_started)
                    result.batches += 1
                    setattr(result, name, getattr(result, name) + done)
                    if done < self.settings.cleanup_batch_size:
                        break
            self._refresh_sqlite_stats()
        with self.runtime.session_factory() as session:
            result.oldest_expired_seconds = _oldest_expired(session, payload_cutoff, dedupe_cutoff)
        result.seconds = time.monotonic() - started
        result.finished_at = self.runtime.clock()
        return result

    def _refresh_sqlite_stats(self) -> None:
        """SQLite plans without statistics until ANALYZE has run, and without them it
        reads every finished event through the status index and sorts them, instead of
        taking the oldest prunable ones from ix_events_prunable. A sampled ANALYZE (a
        few hundred rows an index) at most hourly keeps its plans on the indexes."""
        if self.runtime.engine.dialect.name != "sqlite":
            return
        now = time.monotonic()
        if self._stats_at is not None and now - self._stats_at < SQLITE_STATS_SECONDS:
            return
        with self.runtime.engine.begin() as connection:
            connection.exec_driver_sql("PRAGMA analysis_limit = 400")
            connection.exec_driver_sql("ANALYZE events")
        self._stats_at = now

    def _delete_events(self, session: Session, cutoff: datetime) -> int:
        ids = self._claim(session, _deletable(cutoff))
        # Attempts and replays go with their event (ON DELETE CASCADE).
        result = session.execute(delete(Event).where(Event.id.in_(ids), _deletable(cutoff)))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def _prune_payloads(self, session: Session, cutoff: datetime) -> int:
        ids = self._claim(session, _prunable(cutoff))
        result = session.execute(
            update(Event)
            .where(Event.id.in_(ids), _prunable(cutoff))
            # null(), not None: None on a JSON column stores the JSON value 'null'.
            .values(body=None, headers=null())
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def _claim(self, session: Session, condition: ColumnElement[bool]) -> list[int]:
        """Lock a batch of expired events, oldest first, skipping any another transaction
        holds. The caller changes them in a second statement that checks the condition
        again: its snapshot is taken after the locks, so it sees a replay requested (and
        committed) between this statement's start and its lock."""
        return list(
            session.scalars(
                select(Event.id)
                .where(condition)
                .order_by(Event.received_at)
                .limit(self.settings.cleanup_batch_size)
                .with_for_update(skip_locked=True)
            )
        )

    def _delete_by_key(
        self,
        session: Session,
        entity: type[Base],
        key: tuple[InstrumentedAttribute[Any], ...],
        condition: ColumnElement[bool],
    ) -> int:
        """A batch of a side table keyed by several columns, rows others hold skipped."""
        keys = (
            select(*key)
            .where(condition)
            .limit(self.settings.cleanup_batch_size)
            .with_for_update(skip_locked=True)
        )
        result = session.execute(delete(entity).where(tuple_(*key).in_(keys)))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _idle_key(cutoff: datetime) -> ColumnElement[bool]:
    return and_(OrderingKey.updated_at < cutoff, OrderingKey.parked_event_id.is_(None))


def _old_batch(cutoff: datetime) -> ColumnElement[bool]:
    return and_(BulkReplay.status != RUNNING, BulkReplay.created_at < cutoff)


def _delete_where(session: Session, entity: type[Base], condition: ColumnElement[bool]) -> int:
    """Small side tables: one statement (their rows are few, hours or entries)."""
    result = session.execute(delete(entity).where(condition))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _delete_heartbeats(session: Session, now: datetime) -> int:
    result = session.execute(delete(Heartbeat).where(Heartbeat.beat_at < now - HEARTBEAT_RETENTION))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _no_work_in_hand() -> ColumnElement[bool]:
    """No outbox row, no replay and no forward waiting: a replay whose job skipped it
    (another worker held it, then died) waits without an outbox row until the sweep
    writes one; a forward waits while its destination is away or paused."""
    return and_(
        ~exists().where(OutboxEntry.event_id == Event.id),
        ~exists().where(Replay.event_id == Event.id, Replay.status == PENDING),
        ~exists().where(Forward.event_id == Event.id, Forward.status == FORWARD_PENDING),
    )


def _prunable(cutoff: datetime) -> ColumnElement[bool]:
    # The same predicate as the partial index ix_events_prunable, so that it is used. The
    # statuses are written into the SQL: SQLite matches a partial index's predicate only
    # against literals, never against bound parameters (see _refresh_sqlite_stats too).
    finished: BindParameter[list[str]] = bindparam(
        "finished", [PROCESSED, IGNORED], expanding=True, literal_execute=True
    )
    return and_(
        Event.body.is_not(None),
        Event.status.in_(finished),
        Event.received_at < cutoff,
        _no_work_in_hand(),
        # A dead forward keeps its body, to be replayed; the event goes at its dedupe
        # clock as a dead event does.
        ~exists().where(Forward.event_id == Event.id, Forward.status == FORWARD_DEAD),
    )


def _deletable(cutoff: datetime) -> ColumnElement[bool]:
    return and_(
        Event.received_at < cutoff,
        Event.status != PENDING,
        _no_work_in_hand(),
        _no_sibling_kept(cutoff),
    )


def _no_sibling_kept(cutoff: datetime) -> ColumnElement[bool]:
    """The first event stored under an id stays while a conflict of it (another body under
    the id) is younger than the clock or pending: without it, a retry of that conflict's
    body would be stored as new under the id and run again. A conflict goes on its own
    clock, as any event. Probed through the dedupe key's (endpoint_id, external_id)
    prefix, for first events only."""
    conflict = aliased(Event)
    return or_(
        Event.variant != "",
        ~exists().where(
            conflict.endpoint_id == Event.endpoint_id,
            conflict.external_id == Event.external_id,
            conflict.variant != "",
            or_(conflict.received_at >= cutoff, conflict.status == PENDING),
        ),
    )


def _count(session: Session, entity: type[Base], condition: ColumnElement[bool]) -> int:
    return int(session.scalar(select(func.count()).select_from(entity).where(condition)) or 0)


def _oldest_expired(session: Session, payload_cutoff: datetime, dedupe_cutoff: datetime) -> float:
    """Seconds past its clock of the oldest row that cleanup has not reached yet."""
    ages = [0.0]
    for cutoff, condition in (
        (payload_cutoff, _prunable(payload_cutoff)),
        (dedupe_cutoff, _deletable(dedupe_cutoff)),
    ):
        # The first by received_at's index, rather than min() over every match (which a
        # planner without statistics answered by hashing every row after the cutoff).
        oldest = session.scalar(
            select(Event.received_at).where(condition).order_by(Event.received_at).limit(1)
        )
        if oldest is not None:
            ages.append((cutoff - oldest).total_seconds())
    return max(ages)
