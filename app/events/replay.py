"""Replay requests: explicit and audited. Functions take the session first and never commit."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from hooklatch.errors import NotFound
from hooklatch.events.models import PENDING, Event, OutboxEntry, Replay


def request_replay(
    session: Session, event_id: int, *, requested_by: str, reason: str | None, now: datetime
) -> Replay:
    if session.get(Event, event_id) is None:
        raise NotFound(f"no event {event_id}")
    replay = Replay(
        event_id=event_id,
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
