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
   bulk replay's row is locked with ``SKIP LOCKED``, so one relay advances it at a time, by
   ``rate`` times the seconds since its last step, and only as far as fewer than
   ``window`` (HOOKLATCH_REPLAY_BATCH_WINDOW) replays wait to be run: little is ever
   queued ahead of the workers, and a cancel has little to undo. Each item is claimed,
   and given its outcome in the transaction that requests its replay: no event is replayed
   twice for one bulk replay (``uq_replays_batch_id_event_id`` says so again). An event
   that succeeded since the bulk replay was planned, or whose payload retention deleted,
   is skipped.
4. **Cancel** (``cancel``): items not reached stay unreplayed, and the replays asked for
   that no worker has started are cancelled; a replay already running finishes.

Functions take the session first and never commit. (The tables keep the name they were
given, ``replay_batches``; a bulk replay's id is a replay's ``batch_id``.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypedDict

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.errors import BadRequest, NotFound, ReplayRefused
from hooklatch.events.browse import EventFilter, bounded, count, oldest
from hooklatch.events.models import (
    PENDING,
    PROCESSED,
    BulkReplay,
    BulkReplayItem,
    Event,
    OutboxEntry,
    Replay,
)
from hooklatch.events.replay import request_replay
from hooklatch.jsontypes import JSON

RUNNING, DONE, CANCELLED = "running", "done", "cancelled"
REPLAYED, SKIPPED = "replayed", "skipped"
SAMPLE = 20
# A step never takes more than this many seconds' worth of replays: after the relays
# were away for an hour, a bulk replay resumes at its rate instead of all at once.
MAX_STEP_SECONDS = 5.0
MAX_WATERMARK = 2**63 - 1


@dataclass(frozen=True)
class Plan:
    matched: int
    sample: Sequence[Event]
    cap: int
    watermark: int  # the newest event id when planned: the bulk replay goes no further

    @property
    def over_cap(self) -> bool:
        return self.matched > self.cap


def plan(session: Session, events: EventFilter, *, cap: int) -> Plan:
    """What a bulk replay of ``events`` would replay (counting stops past ``cap``)."""
    watermark = _newest_id(session)
    sample = oldest(session, events, limit=SAMPLE, newest=watermark)
    matched = count(session, events, up_to=cap, newest=watermark)
    return Plan(matched=matched, sample=sample, cap=cap, watermark=watermark)


def watermark_of(value: JSON) -> int | None:
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
) -> BulkReplay:
    """Start a bulk replay of what ``events`` match, up to ``watermark`` (the dry run's)
    if given."""
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
    bulk_replay = BulkReplay(
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
    session.add(bulk_replay)
    session.flush()
    session.execute(
        insert(BulkReplayItem), [{"batch_id": bulk_replay.id, "event_id": i} for i in ids]
    )
    audit.record(
        session,
        actor=actor,
        action="bulk_replay",
        target=f"batch {bulk_replay.id}",
        now=now,
        details={"filter": bulk_replay.filter, "events": len(ids), "reason": reason, "rate": rate},
    )
    return bulk_replay


def advance(session: Session, *, now: datetime, window: int) -> int:
    """One step of the oldest running bulk replay, unless another relay is advancing it:
    its share of replays since its last step, as far as fewer than ``window`` replays wait
    to be run. Returns how many items it settled."""
    bulk_replay = _oldest_running(session)
    if bulk_replay is None:
        return 0
    elapsed = min(MAX_STEP_SECONDS, max(0.0, (now - bulk_replay.advanced_at).total_seconds()))
    due = int(bulk_replay.rate * elapsed)
    if due < 1:
        return 0
    # The rate's share is spent whether or not the window lets it be used: a bulk replay
    # held back never makes up for it in a burst.
    bulk_replay.advanced_at = now
    due = min(due, window - in_flight(session))
    if due < 1:
        return 0
    items = session.scalars(
        select(BulkReplayItem)
        .where(BulkReplayItem.batch_id == bulk_replay.id, BulkReplayItem.outcome.is_(None))
        .order_by(BulkReplayItem.event_id)
        .limit(due)
        .with_for_update(skip_locked=True)
    ).all()
    for item in items:
        item.outcome = _replay_item(session, bulk_replay, item.event_id, now)
        if item.outcome == REPLAYED:
            bulk_replay.replayed += 1
        else:
            bulk_replay.skipped += 1
    if len(items) < due and not _waiting(session, bulk_replay.id):
        bulk_replay.status, bulk_replay.finished_at = DONE, now
    session.flush()
    return len(items)


def _oldest_running(session: Session) -> BulkReplay | None:
    """The oldest running bulk replay, and only it, locked: bulk replays run one after the
    other, so the rate and the window hold whatever the number of bulk replays and relays.
    A relay that finds it locked (by another relay advancing it) does nothing this time."""
    oldest = session.scalar(
        select(BulkReplay.id).where(BulkReplay.status == RUNNING).order_by(BulkReplay.id).limit(1)
    )
    if oldest is None:
        return None
    return session.scalars(
        select(BulkReplay)
        .where(BulkReplay.id == oldest, BulkReplay.status == RUNNING)
        .with_for_update(skip_locked=True)
    ).first()


def in_flight(session: Session) -> int:
    """Replays asked for and not run yet, whoever asked: their outbox rows (an index of
    replays' rows only)."""
    return session.scalar(select(func.count()).where(OutboxEntry.replay_id.is_not(None))) or 0


@dataclass(frozen=True)
class Cancelled:
    bulk_replay: BulkReplay
    replays: int  # replays asked for and not started, cancelled now


def cancel(session: Session, bulk_replay_id: int, *, actor: str, now: datetime) -> Cancelled:
    """Stop the bulk replay: no further item is asked for, and its replays asked for that
    no worker has started are cancelled (their outbox rows deleted; a job that already
    holds one finds it cancelled and skips it). A replay running now finishes.

    A bulk replay done asking may still have replays waiting, and one cancelled when a
    cancel left its replays alone may have thousands: cancelling either cancels those too."""
    bulk_replay = session.scalars(
        select(BulkReplay).where(BulkReplay.id == bulk_replay_id).with_for_update()
    ).one_or_none()
    if bulk_replay is None:
        raise NotFound(f"no bulk replay {bulk_replay_id}")
    # Those a worker holds (SKIP LOCKED) are running: they finish.
    waiting = session.scalars(
        select(Replay.id)
        .where(Replay.batch_id == bulk_replay.id, Replay.status == PENDING)
        .with_for_update(skip_locked=True)
    ).all()
    if waiting:
        session.execute(
            update(Replay)
            .where(Replay.id.in_(waiting))
            .values(status=CANCELLED, finished_at=now, error="cancelled with its bulk replay")
        )
        session.execute(delete(OutboxEntry).where(OutboxEntry.replay_id.in_(waiting)))
    if bulk_replay.status == RUNNING or waiting:
        bulk_replay.status = CANCELLED
        bulk_replay.finished_at = bulk_replay.finished_at or now
        audit.record(
            session,
            actor=actor,
            action="bulk_replay_cancelled",
            target=f"batch {bulk_replay.id}",
            now=now,
            details={
                "replayed": bulk_replay.replayed,
                "skipped": bulk_replay.skipped,
                "replays_cancelled": len(waiting),
            },
        )
    session.flush()
    return Cancelled(bulk_replay=bulk_replay, replays=len(waiting))


def get(session: Session, bulk_replay_id: int) -> BulkReplay:
    bulk_replay = session.get(BulkReplay, bulk_replay_id)
    if bulk_replay is None:
        raise NotFound(f"no bulk replay {bulk_replay_id}")
    return bulk_replay


def recent(session: Session, *, limit: int = 20) -> Sequence[BulkReplay]:
    return session.scalars(select(BulkReplay).order_by(BulkReplay.id.desc()).limit(limit)).all()


class Progress(TypedDict):
    """A bulk replay as the API answers it (``describe``)."""

    id: int
    status: str
    requested_by: str
    reason: str
    filter: dict[str, str]
    watermark: int
    matched: int
    replayed: int
    skipped: int
    left: int
    replays: dict[str, int]  # its replays by status
    rate: float
    created_at: str
    finished_at: str | None


def describe(session: Session, bulk_replay: BulkReplay) -> Progress:
    """The bulk replay, with how its replays have fared so far."""
    left = session.scalar(
        select(func.count()).where(
            BulkReplayItem.batch_id == bulk_replay.id, BulkReplayItem.outcome.is_(None)
        )
    )
    outcomes = session.execute(
        select(Replay.status, func.count())
        .where(Replay.batch_id == bulk_replay.id)
        .group_by(Replay.status)
    ).all()
    return {
        "id": bulk_replay.id,
        "status": bulk_replay.status,
        "requested_by": bulk_replay.requested_by,
        "reason": bulk_replay.reason,
        "filter": bulk_replay.filter,
        "watermark": bulk_replay.watermark,
        "matched": bulk_replay.matched,
        "replayed": bulk_replay.replayed,
        "skipped": bulk_replay.skipped,
        # Items not reached yet (or never, once cancelled); retention deletes an item with
        # its event, so this, not matched minus the others, is what is left.
        "left": int(left or 0),
        "replays": {status: int(n) for status, n in outcomes},
        "rate": bulk_replay.rate,
        "created_at": bulk_replay.created_at.isoformat(),
        "finished_at": bulk_replay.finished_at.isoformat() if bulk_replay.finished_at else None,
    }


def _replay_item(session: Session, bulk_replay: BulkReplay, event_id: int, now: datetime) -> str:
    event = session.scalars(
        select(Event).where(Event.id == event_id).with_for_update()
    ).one_or_none()
    if event is None or event.body is None:
        return SKIPPED  # deleted or pruned by retention since
    succeeded_since = (
        event.status == PROCESSED
        and event.processed_at is not None
        and event.processed_at >= bulk_replay.created_at
    )
    if succeeded_since:
        return SKIPPED
    try:
        request_replay(
            session,
            event_id,
            requested_by=bulk_replay.requested_by,
            reason=f"bulk replay {bulk_replay.id}: {bulk_replay.reason}",
            now=now,
            batch_id=bulk_replay.id,
        )
    except ReplayRefused:
        # Pending (a provider's retry re-armed it), or a replay of it waiting (another
        # bulk replay, the same one confirmed twice, a replay by hand): its handlers are
        # about to run anyway; a replay now would run them a second time.
        return SKIPPED
    return REPLAYED


def _waiting(session: Session, bulk_replay_id: int) -> bool:
    return (
        session.scalar(
            select(BulkReplayItem.event_id)
            .where(BulkReplayItem.batch_id == bulk_replay_id, BulkReplayItem.outcome.is_(None))
            .limit(1)
        )
        is not None
    )
