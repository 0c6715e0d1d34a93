"""Running handlers: one event (or one replay) per transaction, claimed by a row lock."""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from psycopg2.extensions import TRANSACTION_STATUS_INERROR
from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from app.events.models import (
    DEAD,
    IGNORED,
    PENDING,
    PROCESSED,
    Attempt,
    Event,
    OutboxEntry,
    Replay,
)
from app.handlers import Context, EventView, Route
from app.logs import bind
from app.runtime import Runtime

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
FAILED = "failed"
_random = secrets.SystemRandom()


def idempotency_key(event: Any) -> str:
    return f"hooklatch:{event.endpoint_id}:{event.external_id}"


def backoff(attempt: int, *, base: float, maximum: float) -> timedelta:
    """Exponential backoff with jitter: between half and all of base * 2^(attempt-1)."""
    ceiling = min(maximum, base * 2 ** (attempt - 1))
    return timedelta(seconds=_random.uniform(ceiling / 2, ceiling))


def _view(runtime: Runtime, event: Any) -> EventView:
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
    session: Session, runtime: Runtime, event: Any, routes: list[Route], context: Context
) -> None:
    """Run every handler in a savepoint: an error undoes all their writes, not the claim."""
    view = _view(runtime, event)
    savepoint = session.begin_nested()
    try:
        for route in routes:
            route.handler(view, context)
        if _aborted(session):
            raise RuntimeError(
                "a handler caught a database error and carried on; its writes are undone"
            )
        savepoint.commit()
    except BaseException:
        if savepoint.is_active:
            savepoint.rollback()  # ROLLBACK TO SAVEPOINT: also clears an aborted transaction
        raise


def _aborted(session: Session) -> bool:
    """PostgreSQL refuses every statement after an error until a rollback."""
    driver = session.connection().connection.driver_connection
    info = getattr(driver, "info", None)
    return info is not None and info.transaction_status == TRANSACTION_STATUS_INERROR


def _error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000]
    return text.replace("\x00", "\\x00")  # PostgreSQL text cannot hold NUL


# A worker claims up to this many events in one transaction, and starts no further event
# in it once it has run this long: the per-event cost of a transaction (claim, commit,
# outbox delete) is shared, while locks stay short and effects become visible soon. (A
# slow handler still holds its chunk's earlier events until it returns.)
EVENTS_PER_TRANSACTION = 100
TRANSACTION_SECONDS = 0.25


def process_events(
    runtime: Runtime, event_ids: Sequence[int], *, job_id: str | None = None
) -> Counter[str]:
    """Run the handlers of each pending, due event once. Events are claimed with
    ``FOR UPDATE SKIP LOCKED``, a chunk per transaction; each event's handlers run in a
    savepoint, so one failure undoes only that event's writes. With ``job_id``, the
    outbox rows handed to that job are deleted in the same transactions."""
    counts: Counter[str] = Counter()
    remaining = list(dict.fromkeys(event_ids))
    alone: list[int] = []  # events whose shared transaction could not commit
    while remaining or alone:
        if alone:
            chunk, alone = alone[:1], alone[1:]
        else:
            chunk, remaining = (
                remaining[:EVENTS_PER_TRANSACTION],
                remaining[EVENTS_PER_TRANSACTION:],
            )
        try:
            left, outcomes = _transaction(runtime, chunk, job_id)
        except Exception:
            if len(chunk) == 1:
                raise  # this event alone cannot commit: the job fails and is dispatched again
            # One event's writes broke the shared transaction: run these one per
            # transaction, so that only that one suffers.
            log.warning(
                "a transaction of %d events failed; running them one at a time",
                len(chunk),
                exc_info=True,
            )
            alone.extend(chunk)
            continue
        counts += outcomes
        remaining = left + remaining
    return counts


def _transaction(
    runtime: Runtime, chunk: list[int], job_id: str | None
) -> tuple[list[int], Counter[str]]:
    """One chunk in one transaction: the ids claimed but left for later, and outcomes."""
    outcomes: Counter[str] = Counter()
    with runtime.session_factory.begin() as session:
        done, left = _process_chunk(session, runtime, chunk, outcomes)
        if job_id is not None and done:
            # This job's rows, and rows not handed out yet: a relay that has pushed
            # this job but not committed yet holds them, and this waits for it. (A
            # pending event that still needs a row gets a new one from the sweep.)
            session.execute(
                delete(OutboxEntry).where(
                    OutboxEntry.event_id.in_(done),
                    OutboxEntry.replay_id.is_(None),
                    or_(OutboxEntry.job_id == job_id, OutboxEntry.job_id.is_(None)),
                )
            )
    return left, outcomes


def _process_chunk(
    session: Session, runtime: Runtime, event_ids: list[int], counts: Counter[str]
) -> tuple[list[int], list[int]]:
    """Returns the ids dealt with, and those claimed but left for the next transaction."""
    claimed = {
        row.id: row
        for row in session.execute(
            select(Event.__table__)
            .where(
                Event.id.in_(event_ids),
                Event.status == PENDING,
                Event.next_attempt_at <= runtime.clock(),
            )
            .order_by(Event.id)
            .with_for_update(skip_locked=True)
        )
    }
    writes = _Writes()
    started = time.monotonic()
    done: list[int] = []
    for position, event_id in enumerate(event_ids):
        if done and time.monotonic() - started > TRANSACTION_SECONDS:
            rest = event_ids[position:]
            # Unclaimed ones are settled (processed, not due, or another worker's).
            done += [i for i in rest if i not in claimed]
            writes.apply(session)
            return done, [i for i in rest if i in claimed]
        event = claimed.get(event_id)
        outcome = _process_claimed(session, runtime, event, writes) if event is not None else None
        counts[outcome or "skipped"] += 1
        done.append(event_id)
    writes.apply(session)
    return done, []


@dataclass
class _Writes:
    """The chunk's own writes, held back to the end: written per event, they would be
    flushed one by one as each next savepoint opens."""

    events: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self,
        event: Any,
        status: str,
        attempt: dict[str, Any],
        *,
        next_attempt_at: datetime | None = None,
        last_error: str | None = None,
    ) -> None:
        finished = status in (PROCESSED, IGNORED)
        self.events.append(
            {
                "id": event.id,
                "status": status,
                "attempts": attempt["number"],
                "processed_at": attempt["finished_at"] if finished else None,
                "next_attempt_at": next_attempt_at,
                "last_error": last_error,
            }
        )
        self.attempts.append(attempt)

    def apply(self, session: Session) -> None:
        if self.events:
            session.execute(update(Event), self.events)
            session.execute(insert(Attempt), self.attempts)
        self.events, self.attempts = [], []


def process_event(session: Session, runtime: Runtime, event_id: int) -> str | None:
    """Process one pending, due event. Returns its new status, or None when there was nothing
    to do (already processed, not due yet, or held by another worker right now)."""
    counts: Counter[str] = Counter()
    _process_chunk(session, runtime, [event_id], counts)
    [outcome] = counts
    return None if outcome == "skipped" else outcome


def _process_claimed(session: Session, runtime: Runtime, event: Any, writes: _Writes) -> str:
    now = runtime.clock()
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, external_id=event.external_id):
        routes = runtime.router.handlers_for(event.provider, event.type)
        number = event.attempts + 1
        if not routes:
            writes.add(event, IGNORED, _attempt_row(event, number, IGNORED, routes, now, now))
            log.info("no handler for %s %s: marked ignored", event.provider, event.type)
            return IGNORED
        context = _context(session, runtime, event, number, replay=None)
        try:
            _run(session, runtime, event, routes, context)
        except Exception as exc:
            return _failed(runtime, event, number, routes, exc, now, writes)
        finished = runtime.clock()
        writes.add(event, PROCESSED, _attempt_row(event, number, SUCCEEDED, routes, now, finished))
        return PROCESSED


def _finish(event: Event, status: str, now: datetime) -> None:
    event.status = status
    event.processed_at = now
    event.next_attempt_at = None
    event.last_error = None


def _failed(
    runtime: Runtime,
    event: Any,
    number: int,
    routes: list[Route],
    exc: Exception,
    started: datetime,
    writes: _Writes,
) -> str:
    settings = runtime.settings
    now = runtime.clock()
    error = _error_text(exc)
    attempt = _attempt_row(event, number, FAILED, routes, started, now, error=error)
    if number >= settings.max_attempts:
        writes.add(event, DEAD, attempt, last_error=error)
        log.error("attempt %d failed, event is dead: %s", number, error)
        return DEAD
    delay = backoff(number, base=settings.retry_base_seconds, maximum=settings.retry_max_seconds)
    writes.add(event, PENDING, attempt, next_attempt_at=now + delay, last_error=error)
    log.warning("attempt %d failed, retrying in %.1f s: %s", number, delay.total_seconds(), error)
    return PENDING


def _context(
    session: Session, runtime: Runtime, event: Any, number: int, *, replay: Replay | None
) -> Context:
    return Context(
        session=session,
        idempotency_key=idempotency_key(event),
        attempt=number,
        is_replay=replay is not None,
        replay_id=replay.id if replay else None,
        log=logging.LoggerAdapter(logging.getLogger("hooklatch.handlers"), {}),
    )


def _attempt_row(
    event: Any,
    number: int,
    outcome: str,
    routes: list[Route],
    started: datetime,
    now: datetime,
    *,
    error: str | None = None,
) -> dict[str, Any]:
    return {
        "event_id": event.id,
        "number": number,
        "outcome": outcome,
        "handlers": ",".join(route.name for route in routes),
        "error": error,
        "started_at": started,
        "finished_at": now,
    }


def process_replays(
    runtime: Runtime, replay_ids: Sequence[int], *, job_id: str | None = None
) -> Counter[str]:
    """Each replay in its own transaction, with its outbox rows (handed to ``job_id``)."""
    counts: Counter[str] = Counter()
    for replay_id in dict.fromkeys(replay_ids):
        with runtime.session_factory.begin() as session:
            outcome = process_replay(session, runtime, replay_id) or "skipped"
            if job_id is not None:
                session.execute(
                    delete(OutboxEntry).where(
                        OutboxEntry.replay_id == replay_id,
                        or_(OutboxEntry.job_id == job_id, OutboxEntry.job_id.is_(None)),
                    )
                )
        counts[f"replay_{outcome}"] += 1
    return counts


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
        error = None if outcome == SUCCEEDED else replay.error
        session.add(
            Attempt(
                **_attempt_row(
                    event, number, outcome, routes, started, replay.finished_at, error=error
                ),
                replay_id=replay.id,
            )
        )
        return outcome
