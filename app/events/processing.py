"""Running handlers: one event (or one replay) per transaction, claimed by a row lock."""

from __future__ import annotations

import logging
import secrets
import traceback
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.events.models import DEAD, IGNORED, PENDING, PROCESSED, Attempt, Event, Replay
from app.handlers import Context, EventView, Route
from app.logs import bind
from app.runtime import Runtime

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
FAILED = "failed"
_random = secrets.SystemRandom()


def idempotency_key(event: Event) -> str:
    return f"hooklatch:{event.endpoint_id}:{event.external_id}"


def backoff(attempt: int, *, base: float, maximum: float) -> timedelta:
    """Exponential backoff with jitter: between half and all of base * 2^(attempt-1)."""
    ceiling = min(maximum, base * 2 ** (attempt - 1))
    return timedelta(seconds=_random.uniform(ceiling / 2, ceiling))


def _view(runtime: Runtime, event: Event) -> EventView:
    headers = dict(event.headers or {})
    body = event.body or b""
    return EventView(
        id=event.id,
        endpoint_id=event.endpoint_id,
        provider=event.provider,
        type=event.type,
        external_id=event.external_id,
        payload=runtime.provider(event.provider).payload(headers, body),
        body=body,
        headers=headers,
        received_at=event.received_at,
        occurred_at=event.occurred_at,
    )


def _run(
    session: Session, runtime: Runtime, event: Event, routes: list[Route], context: Context
) -> None:
    """Run every handler in a savepoint: an error undoes all their writes, not the claim."""
    view = _view(runtime, event)
    with session.begin_nested():
        for route in routes:
            route.handler(view, context)


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000]


def process_event(session: Session, runtime: Runtime, event_id: int) -> str | None:
    """Process one pending, due event. Returns its new status, or None when there was nothing
    to do (already processed, not due yet, or held by another worker right now)."""
    now = runtime.clock()
    event = session.scalars(
        select(Event)
        .where(Event.id == event_id, Event.status == PENDING, Event.next_attempt_at <= now)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if event is None:
        return None
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, external_id=event.external_id):
        routes = runtime.router.handlers_for(event.provider, event.type)
        number = event.attempts + 1
        event.attempts = number
        if not routes:
            _finish(event, IGNORED, now)
            session.add(_attempt(event, number, IGNORED, routes, started=now, now=now))
            log.info("no handler for %s %s: marked ignored", event.provider, event.type)
            return IGNORED
        context = _context(session, runtime, event, number, replay=None)
        try:
            _run(session, runtime, event, routes, context)
        except Exception as exc:
            return _failed(session, runtime, event, number, routes, exc, started=now)
        _finish(event, PROCESSED, runtime.clock())
        session.add(_attempt(event, number, SUCCEEDED, routes, started=now, now=runtime.clock()))
        return PROCESSED


def _finish(event: Event, status: str, now: datetime) -> None:
    event.status = status
    event.processed_at = now
    event.next_attempt_at = None
    event.last_error = None


def _failed(
    session: Session,
    runtime: Runtime,
    event: Event,
    number: int,
    routes: list[Route],
    exc: Exception,
    *,
    started: datetime,
) -> str:
    settings = runtime.settings
    now = runtime.clock()
    event.last_error = _error_text(exc)
    session.add(_attempt(event, number, FAILED, routes, started=started, now=now, error=exc))
    if number >= settings.max_attempts:
        event.status = DEAD
        event.next_attempt_at = None
        log.error("attempt %d failed, event is dead: %s", number, event.last_error)
        return DEAD
    delay = backoff(number, base=settings.retry_base_seconds, maximum=settings.retry_max_seconds)
    event.next_attempt_at = now + delay
    log.warning(
        "attempt %d failed, retrying in %.1f s: %s", number, delay.total_seconds(), event.last_error
    )
    return PENDING


def _context(
    session: Session, runtime: Runtime, event: Event, number: int, *, replay: Replay | None
) -> Context:
    return Context(
        session=session,
        idempotency_key=idempotency_key(event),
        attempt=number,
        is_replay=replay is not None,
        replay_id=replay.id if replay else None,
        log=logging.LoggerAdapter(logging.getLogger("hooklatch.handlers"), {}),
    )


def _attempt(
    event: Event,
    number: int,
    outcome: str,
    routes: list[Route],
    *,
    started: datetime,
    now: datetime,
    error: BaseException | None = None,
    replay: Replay | None = None,
) -> Attempt:
    return Attempt(
        event_id=event.id,
        replay_id=replay.id if replay else None,
        number=number,
        outcome=outcome,
        handlers=",".join(route.name for route in routes),
        error=_error_text(error) if error else None,
        started_at=started,
        finished_at=now,
    )


def process_replay(session: Session, runtime: Runtime, replay_id: int) -> str | None:
    """Run an event's handlers again, whatever its state, as the replay asked."""
    replay = session.scalars(
        select(Replay)
        .where(Replay.id == replay_id, Replay.status == PENDING)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if replay is None:
        return None
    event = session.scalars(
        select(Event).where(Event.id == replay.event_id).with_for_update()
    ).one()
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, replay_id=replay.id):
        started = runtime.clock()
        number = 1 + (session.scalar(select(func.count()).where(Attempt.event_id == event.id)) or 0)
        routes = runtime.router.handlers_for(event.provider, event.type)
        context = _context(session, runtime, event, number, replay=replay)
        try:
            _run(session, runtime, event, routes, context)
        except Exception as exc:
            replay.status, replay.error = FAILED, _error_text(exc)
            outcome: str = FAILED
            log.warning("replay %d failed: %s", replay.id, replay.error)
        else:
            replay.status = outcome = SUCCEEDED
            if routes:
                _finish(event, PROCESSED, runtime.clock())
        replay.finished_at = runtime.clock()
        session.add(
            _attempt(
                event,
                number,
                outcome,
                routes,
                started=started,
                now=replay.finished_at,
                error=None if outcome == SUCCEEDED else RuntimeError(replay.error),
                replay=replay,
            )
        )
        return outcome
