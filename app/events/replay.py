"""Replay requests: explicit and audited. Functions take the session first and never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.errors import BadRequest, NotFound, PayloadPruned
from hooklatch.events.models import PENDING, Event, OutboxEntry, Replay
from hooklatch.operations import audit

REASON_MAX = 1000  # characters: a reason is a sentence for the audit log, not a document


def check_reason(reason: str | None) -> None:
    if reason is not None and len(reason) > REASON_MAX:
        raise BadRequest(f"a reason is at most {REASON_MAX} characters", reason="reason_too_long")


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
    # Locked: retention prunes or deletes only unlocked events without outbox rows, so
    # once this commits the payload stays until the replay has run.
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
    replay = Replay(
        event_id=event_id,
        batch_id=batch_id,
        requested_by=requested_by,
        reason=reason,
        requested_at=now,
        status=PENDING,
    )
    session.add(replay)
    session.flush()
    session.add(OutboxEntry(event_id=event_id, replay_id=replay.id, created_at=now))
    session.flush()
    return replay
