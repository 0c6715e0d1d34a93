"""Replay requests: explicit and audited. Functions take the session first and never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.audit import check_reason
from hooklatch.errors import NotFound, PayloadPruned, ReplayRefused
from hooklatch.events.models import PENDING, Attempt, Event, OutboxEntry, Replay


def replay_one(
    session: Session, event_id: int, *, actor: str, reason: str | None, now: datetime
) -> Replay:
    """A replay asked for by someone (the admin API, the console, the CLI), audited."""
    check_reason(reason)
    replay = request_replay(session, event_id, requested_by=actor, reason=reason, now=now)
    audit.record(
        session,
        actor=actor,
        action="replay",
        target=f"event {event_id}",
        now=now,
        details={"replay_id": replay.id, "reason": reason},
    )
    return replay


def request_replay(
    session: Session,
    event_id: int,
    *,
    requested_by: str,
    reason: str | None,
    now: datetime,
    batch_id: int | None = None,
) -> Replay:
    """A replay of the event, with its outbox row. Refused (``ReplayRefused``) while the
    event's handlers are about to run anyway: bulk replay skips such events before it
    asks."""
    # Locked: retention prunes or deletes only unlocked events without outbox rows, so
    # once this commits the payload stays until the replay has run. The lock also makes
    # the checks below hold: this waits for a worker running the event (or a replay of
    # it) to commit, and another request for the same event waits for this one.
    event = session.scalars(
        select(Event).where(Event.id == event_id).with_for_update()
    ).one_or_none()
    if event is None:
        raise NotFound(f"no event {event_id}")
    if event.body is None:
        raise PayloadPruned(
            f"event {event_id}'s body and headers were deleted by retention "
            "(HOOKLATCH_PAYLOAD_RETENTION_DAYS): its handlers cannot run again"
        )
    _refuse_if_about_to_run(session, event, now=now)
    replay = Replay(
        event_id=event_id,
        batch_id=batch_id,
        requested_by=requested_by,
        reason=reason,
        requested_at=now,
        status=PENDING,
        after_attempt_id=session.scalar(
            select(func.max(Attempt.id)).where(Attempt.event_id == event_id)
        ),
    )
    session.add(replay)
    session.flush()
    session.add(OutboxEntry(event_id=event_id, replay_id=replay.id, created_at=now))
    session.flush()
    return replay


def _refuse_if_about_to_run(session: Session, event: Event, *, now: datetime) -> None:
    """A replay of a pending event, or of one whose replay has not run yet, would run its
    handlers a second time: once as that attempt or replay, once as this one."""
    if event.status == PENDING:
        due = event.next_attempt_at
        when = (
            f"due at {due.strftime('%Y-%m-%d %H:%M:%S')} UTC"
            if due is not None and due > now
            else "due now"
        )
        if event.ordering_key is not None:
            when += ", or once its ordering key lets it run"  # a parked or busy key
        raise ReplayRefused(
            f"event {event.id} is pending: its handlers run at its next attempt ({when}), "
            "and a replay now would run them twice. Replay it once that attempt has run, "
            "if it is still needed.",
            reason="event_pending",
        )
    waiting = session.scalar(
        select(Replay.id)
        .where(Replay.event_id == event.id, Replay.status == PENDING)
        .order_by(Replay.id)
        .limit(1)
    )
    if waiting is not None:
        raise ReplayRefused(
            f"replay {waiting} of event {event.id} has not run yet, and another now would "
            "run its handlers twice. Ask again once it has run, if it is still needed.",
            reason="replay_pending",
        )
