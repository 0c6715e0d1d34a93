"""Bulk replay: plan what a filter matches, then replay it oldest first at a limited rate.

1. **Dry run** (``plan``): how many events match, and the oldest of them, changing
   nothing. It freezes the set: the newest event id then is its watermark, which the
   confirmation carries back.
2. **Start** (``start``): with a reason, a filter, and at most
   ``HOOKLATCH_REPLAY_BATCH_MAX`` events: one item row per matching event up to the
   dry run's watermark (or, without one, the newest id now), none stored later, however
   long the dry run's page stayed open. The audit log records who,
   why, the filter and how many.
3. **Advance** (``advance``, run by every relay, and by the embedded dispatcher): the
   batch row is locked with ``SKIP LOCKED``, so one relay advances it at a time, by
   ``rate`` times the seconds since its last step, and only as far as fewer than
   ``window`` (HOOKLATCH_REPLAY_BATCH_WINDOW) replays wait to be run: little is ever
   queued ahead of the workers, and a cancel has little to undo. Each item is claimed,
   and given its outcome in the transaction that requests its replay: no event is replayed
   twice for one batch (``uq_replays_batch_id_event_id`` says so again). An event that
   succeeded since the batch was planned, or whose payload retention deleted, is skipped.
4. **Cancel** (``cancel``): items not reached stay unreplayed, and the replays asked for
   that no worker has started are cancelled; a replay already running finishes.

Functions take the session first and never commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.errors import BadRequest, NotFound, ReplayRefused
from hooklatch.events.browse import EventFilter, bounded, count, oldest
from hooklatch.events.models import (
    PENDING,
    PROCESSED,
    Event,
    OutboxEntry,
    Replay,
    ReplayBatch,
    ReplayBatchItem,
)
from hooklatch.events.replay import request_replay

RUNNING, DONE, CANCELLED = "running", "done", "cancelled"
REPLAYED, SKIPPED = "replayed", "skipped"
SAMPLE = 20
# A step never takes more than this many seconds' worth of replays: after the relays
# were away for an hour, a batch resumes at its rate instead of all at once.
MAX_STEP_SECONDS = 5.0
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class Plan:
    matched: int
    sample: Sequence[Event]
    cap: int
    watermark: int  # the newest event id when planned: the batch goes no further

    @property
    def over_cap(self) -> bool:
        return self.matched > self.cap


def plan(session: Session, events: EventFilter, *, cap: int) -> Plan:
    """What a batch of ``events`` would replay (counting stops past ``cap``)."""
    watermark = _newest_id(session)
    sample = oldest(session, events, limit=SAMPLE, newest=watermark)
    matched = count(session, events, up_to=cap, newest=watermark)
    return Plan(matched=matched, sample=sample, cap=cap, watermark=watermark)


def watermark_of(value: Any) -> int | None:
    """A dry run's watermark as sent back (form text or a JSON number); absent: None."""
    if value is None or value == "":
        return None
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        number = int(value)
    if number is None or not 0 <= number <= MAX_WATERMARK:
        raise BadRequest(
            "watermark must be the event id a dry run gave (a whole number)",
            reason="bad_parameter",
        )
    return number


def _newest_id(session: Session) -> int:
    return session.scalar(select(func.max(Event.id))) or 0


def start(
    session: Session,
    events: EventFilter,
    *,
    actor: str,
    reason: str,
    cap: int,
    rate: float,
    now: datetime,
    watermark: int | None = None,
) -> ReplayBatch:
    """Start a batch of what ``events`` match, up to ``watermark`` (the dry run's) if
    given."""
    if not reason.strip():
        raise BadRequest("a bulk replay needs a reason", reason="reason_required")
    audit.check_reason(reason)
    if events.is_empty():
        raise BadRequest(
            "a bulk replay needs a filter (status, provider, endpoint, type, times or id)",
            reason="filter_required",
        )
    newest = _newest_id(session)
    watermark = newest if watermark is None else max(0, min(watermark, newest))
    with bounded(session):
        ids = session.scalars(
            events.select_ids(session)
            .where(Event.id <= watermark)
            .order_by(Event.id)
            .limit(cap + 1)
        ).all()
    if not ids:
        raise BadRequest("no event matches this filter", reason="nothing_matches")
    if len(ids) > cap:
        raise BadRequest(
            f"this filter matches more than {cap} events, the most one bulk replay may "
            "touch (HOOKLATCH_REPLAY_BATCH_MAX): narrow it",
            reason="over_cap",
        )
    batch = ReplayBatch(
        requested_by=actor[:200],
        reason=reason,
        filter=events.as_dict(),
        watermark=watermark,
        matched=len(ids),
        replayed=0,
        skipped=0,
        rate=rate,
        status=RUNNING,
        created_at=now,
        advanced_at=now,
    )
    session.add(batch)
    session.flush()
    session.execute(insert(ReplayBatchItem), [{"batch_id": batch.id, "event_id": i} for i in ids])
    audit.record(
        session,
        actor=actor,
        action="bulk_replay",
        target=f"batch {batch.id}",
        now=now,
        details={"filter": batch.filter, "events": len(ids), "reason": reason, "rate": rate},
    )
    return batch


def advance(session: Session, *, now: datetime, window: int) -> int:
    """One step of the oldest running batch, unless another relay is advancing it: its
    share of replays since its last step, as far as fewer than ``window`` replays wait to
    be run. Returns how many items it settled."""
    batch = _oldest_running(session)
    if batch is None:
        return 0
    elapsed = min(MAX_STEP_SECONDS, max(0.0, (now - batch.advanced_at).total_seconds()))
    due = int(batch.rate * elapsed)
    if due < 1:
        return 0
    # The rate's share is spent whether or not the window lets it be used: a batch held
    # back never makes up for it in a burst.
    batch.advanced_at = now
    due = min(due, window - in_flight(session))
    if due < 1:
        return 0
    items = session.scalars(
        select(ReplayBatchItem)
        .where(ReplayBatchItem.batch_id == batch.id, ReplayBatchItem.outcome.is_(None))
        .order_by(ReplayBatchItem.event_id)
        .limit(due)
        .with_for_update(skip_locked=True)
    ).all()
    for item in items:
        item.outcome = _replay_item(session, batch, item.event_id, now)
        if item.outcome == REPLAYED:
            batch.replayed += 1
        else:
            batch.skipped += 1
    if len(items) < due and not _waiting(session, batch.id):
        batch.status, batch.finished_at = DONE, now
    session.flush()
    return len(items)


def _oldest_running(session: Session) -> ReplayBatch | None:
    """The oldest running batch, and only it, locked: batches run one after the other, so
    the rate and the window hold whatever the number of batches and relays. A relay that
    finds it locked (by another relay advancing it) does nothing this time."""
    oldest = session.scalar(
        select(ReplayBatch.id)
        .where(ReplayBatch.status == RUNNING)
        .order_by(ReplayBatch.id)
        .limit(1)
    )
    if oldest is None:
        return None
    return session.scalars(
        select(ReplayBatch)
        .where(ReplayBatch.id == oldest, ReplayBatch.status == RUNNING)
        .with_for_update(skip_locked=True)
    ).first()


def in_flight(session: Session) -> int:
    """Replays asked for and not run yet, whoever asked: their outbox rows (an index of
    replays' rows only)."""
    return session.scalar(select(func.count()).where(OutboxEntry.replay_id.is_not(None))) or 0


@dataclass(frozen=True)
class Cancelled:
    batch: ReplayBatch
    replays: int  # replays asked for and not started, cancelled now


def cancel(session: Session, batch_id: int, *, actor: str, now: datetime) -> Cancelled:
    """Stop the batch: no further item is asked for, and its replays asked for that no
    worker has started are cancelled (their outbox rows deleted; a job that already holds
    one finds it cancelled and skips it). A replay running now finishes.

    A batch done asking may still have replays waiting, and one cancelled when a cancel
    left its replays alone may have thousands: cancelling either cancels those too."""
    batch = session.scalars(
        select(ReplayBatch).where(ReplayBatch.id == batch_id).with_for_update()
    ).one_or_none()
    if batch is None:
        raise NotFound(f"no bulk replay {batch_id}")
    # Those a worker holds (SKIP LOCKED) are running: they finish.
    waiting = session.scalars(
        select(Replay.id)
        .where(Replay.batch_id == batch.id, Replay.status == PENDING)
        .with_for_update(skip_locked=True)
    ).all()
    if waiting:
        session.execute(
            update(Replay)
            .where(Replay.id.in_(waiting))
            .values(status=CANCELLED, finished_at=now, error="cancelled with its bulk replay")
        )
        session.execute(delete(OutboxEntry).where(OutboxEntry.replay_id.in_(waiting)))
    if batch.status == RUNNING or waiting:
        batch.status, batch.finished_at = CANCELLED, batch.finished_at or now
        audit.record(
            session,
            actor=actor,
            action="bulk_replay_cancelled",
            target=f"batch {batch.id}",
            now=now,
            details={
                "replayed": batch.replayed,
                "skipped": batch.skipped,
                "replays_cancelled": len(waiting),
            },
        )
    session.flush()
    return Cancelled(batch=batch, replays=len(waiting))


def get(session: Session, batch_id: int) -> ReplayBatch:
    batch = session.get(ReplayBatch, batch_id)
    if batch is None:
        raise NotFound(f"no bulk replay {batch_id}")
    return batch


def recent(session: Session, *, limit: int = 20) -> Sequence[ReplayBatch]:
    return session.scalars(select(ReplayBatch).order_by(ReplayBatch.id.desc()).limit(limit)).all()


def describe(session: Session, batch: ReplayBatch) -> dict[str, Any]:
    """The batch, with how its replays have fared so far."""
    left = (
        session.scalar(
            select(func.count()).where(
                ReplayBatchItem.batch_id == batch.id, ReplayBatchItem.outcome.is_(None)
            )
        )
        or 0
    )
    outcomes = dict(
        session.execute(
            select(Replay.status, func.count())
            .where(Replay.batch_id == batch.id)
            .group_by(Replay.status)
        ).all()
    )
    return {
        "id": batch.id,
        "status": batch.status,
        "requested_by": batch.requested_by,
        "reason": batch.reason,
        "filter": batch.filter,
        "watermark": batch.watermark,
        "matched": batch.matched,
        "replayed": batch.replayed,
        "skipped": batch.skipped,
        # Items not reached yet (or never, once cancelled); retention deletes an item with
        # its event, so this, not matched minus the others, is what is left.
        "left": int(left),
        "replays": {status: int(n) for status, n in outcomes.items()},
        "rate": batch.rate,
        "created_at": batch.created_at.isoformat(),
        "finished_at": batch.finished_at.isoformat() if batch.finished_at else None,
    }


def _replay_item(session: Session, batch: ReplayBatch, event_id: int, now: datetime) -> str:
    event = session.scalars(
        select(Event).where(Event.id == event_id).with_for_update()
    ).one_or_none()
    if event is None or event.body is None:
        return SKIPPED  # deleted or pruned by retention since
    succeeded_since = (
        event.status == PROCESSED
        and event.processed_at is not None
        and event.processed_at >= batch.created_at
    )
    if succeeded_since:
        return SKIPPED
    try:
        request_replay(
            session,
            event_id,
            requested_by=batch.requested_by,
            reason=f"bulk replay {batch.id}: {batch.reason}",
            now=now,
            batch_id=batch.id,
        )
    except ReplayRefused:
        # Pending (a provider's retry re-armed it), or a replay of it waiting (another
        # batch, the same batch confirmed twice, a replay by hand): its handlers are about
        # to run anyway; a replay now would run them a second time.
        return SKIPPED
    return REPLAYED


def _waiting(session: Session, batch_id: int) -> bool:
    return (
        session.scalar(
            select(ReplayBatchItem.event_id)
            .where(ReplayBatchItem.batch_id == batch_id, ReplayBatchItem.outcome.is_(None))
            .limit(1)
        )
        is not None
    )
