"""Events read back, with their attempts and replays, as JSON for the admin API and the
CLI."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from hooklatch.events.models import Attempt, Event, Replay
from hooklatch.jsontypes import JSONObject


def describe_event(event: Event) -> JSONObject:
    return {
        "id": event.id,
        "endpoint_id": event.endpoint_id,
        "provider": event.provider,
        "external_id": event.external_id,
        "type": event.type,
        "status": event.status,
        "attempts": event.attempts,
        "received_at": _iso(event.received_at),
        "occurred_at": _iso(event.occurred_at),
        "next_attempt_at": _iso(event.next_attempt_at),
        "processed_at": _iso(event.processed_at),
        "last_error": event.last_error,
        "body_sha256": event.body_sha256,
        "mismatched_duplicates": event.mismatched_duplicates,
        "repeats_event_id": event.repeats_event_id,
        "conflicts_with_event_id": event.conflicts_with_event_id,
        "origin": event.origin,
        "verified_by": event.verified_by,
    }


def event_history(session: Session, event: Event) -> JSONObject:
    attempts = session.scalars(
        select(Attempt).where(Attempt.event_id == event.id).order_by(Attempt.id)
    ).all()
    replays = session.scalars(
        select(Replay).where(Replay.event_id == event.id).order_by(Replay.id)
    ).all()
    # Later events stored with this event's body under another id or type (found by the
    # body's hash index), and deliveries of its id with other bodies, stored apart (found
    # by the dedupe key's (endpoint_id, external_id) prefix).
    repeated_by = _flagged_by(session, event, Event.body_sha256, Event.repeats_event_id)
    conflicted_by = _flagged_by(session, event, Event.external_id, Event.conflicts_with_event_id)
    return {
        **describe_event(event),
        # Retention deleted the body and headers: the event can no longer be replayed.
        "payload_pruned": event.body is None,
        "repeated_by": [*repeated_by],
        "conflicted_by": [*conflicted_by],
        "attempts_log": [
            {
                "number": a.number,
                "outcome": a.outcome,
                "replay_id": a.replay_id,
                "handlers": [h for h in a.handlers.split(",") if h],
                "error": a.error,
                "traceback": a.traceback,
                "started_at": _iso(a.started_at),
                "finished_at": _iso(a.finished_at),
            }
            for a in attempts
        ],
        "replays": [describe_replay(r) for r in replays],
    }


def _flagged_by(
    session: Session,
    event: Event,
    shared: InstrumentedAttribute[str],
    flag: InstrumentedAttribute[int | None],
) -> list[int]:
    """The events of ``event``'s endpoint that share its value of ``shared`` and name it
    in ``flag``, oldest first."""
    query = select(Event.id).where(
        Event.endpoint_id == event.endpoint_id,
        shared == getattr(event, shared.key),
        flag == event.id,
    )
    return list(session.scalars(query.order_by(Event.id)))


def describe_replay(replay: Replay) -> JSONObject:
    return {
        "id": replay.id,
        "event_id": replay.event_id,
        "status": replay.status,
        "requested_by": replay.requested_by,
        "reason": replay.reason,
        "batch_id": replay.batch_id,
        "requested_at": _iso(replay.requested_at),
        "finished_at": _iso(replay.finished_at),
        "error": replay.error,
    }


def repeated_bodies(session: Session, endpoint_id: str) -> int:
    """How many of an endpoint's events repeat the body of an earlier one."""
    return _flagged(session, endpoint_id, Event.repeats_event_id)


def conflicts(session: Session, endpoint_id: str) -> int:
    """How many of an endpoint's events repeat an earlier one's id with another body."""
    return _flagged(session, endpoint_id, Event.conflicts_with_event_id)


def _flagged(session: Session, endpoint_id: str, flag: InstrumentedAttribute[int | None]) -> int:
    """Counted on a partial index of the flagged rows (ix_events_repeated_bodies,
    ix_events_conflicts)."""
    return (
        session.scalar(
            select(func.count())
            .select_from(Event)
            .where(Event.endpoint_id == endpoint_id, flag.is_not(None))
        )
        or 0
    )


# The most events one listing returns (the admin API and the CLI).
MAX_LIST_LIMIT = 500


def list_events(session: Session, *, status: str | None = None, limit: int = 50) -> Sequence[Event]:
    query = select(Event).order_by(Event.id.desc()).limit(limit)
    if status:
        query = query.where(Event.status == status)
    return session.scalars(query).all()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
