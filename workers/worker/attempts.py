"""An attempt at one claimed event, in the chunk's transaction: its handlers run in a
savepoint (``HandlerRun``), so that a failure undoes only their writes, and the attempt
ends in the event's new state and an attempt row (``AttemptResult``), which the chunk
writes with the others' at its end (``Writes``). A replay runs handlers the same way
(``replays``). Nothing here commits.
"""

from __future__ import annotations

import logging
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, Protocol, TypedDict

from psycopg2.extensions import TRANSACTION_STATUS_INERROR
from sqlalchemy import insert, update
from sqlalchemy.orm import Session

from hooklatch.db import backoff
from hooklatch.events import identity
from hooklatch.events.models import DEAD, IGNORED, PENDING, PROCESSED, Attempt, Event
from hooklatch.forwarding import record as forwarding
from hooklatch.handlers import Context, EventView, Route
from hooklatch.logs import bind
from hooklatch.ordering.stale import StaleGuard, Staleness
from hooklatch.runtime import Runtime

# Attempts are logged under the name of the module that ran them before, which log filters
# may already select.
log = logging.getLogger("hooklatch.workers.worker.processing")

# An attempt's outcome (attempts.outcome), besides IGNORED when no handler matched.
SUCCEEDED = "succeeded"
FAILED = "failed"
STALE = "stale"  # older than its key's newest applied event: ignored, with the reason
# The attempts whose event is forwarded: it ran, or no handler wanted it.
FORWARDED_OUTCOMES = (SUCCEEDED, IGNORED)

# The most of a traceback an attempt keeps: its innermost frames, where the error is.
TRACEBACK_CHARS = 16_000


class ClaimedEvent(Protocol):
    """An event as it runs: a claimed row with its payload (``LoadedEvent``), or an Event."""

    id: int
    endpoint_id: str
    provider: str
    type: str
    external_id: str
    attempts: int
    body: bytes | None
    headers: dict[str, str] | None
    received_at: datetime
    next_attempt_at: datetime | None
    occurred_at: datetime | None
    ordering_key: str | None
    repeats_event_id: int | None
    variant: str
    conflicts_with_event_id: int | None


def idempotency_key(event: ClaimedEvent) -> str:
    """The same on every attempt and replay of an event (hooklatch.events.identity)."""
    return identity.idempotency_key(event.endpoint_id, event.external_id, event.variant)


def error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000]
    return text.replace("\x00", "\\x00")  # PostgreSQL text cannot hold NUL


def traceback_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc)).strip()
    if len(text) > TRACEBACK_CHARS:
        text = "...\n" + text[-TRACEBACK_CHARS:]
    return text.replace("\x00", "\\x00")


class AttemptRow(TypedDict):
    """An ``attempts`` row, as the chunk inserts it (a replay adds its id)."""

    event_id: int
    number: int
    outcome: str
    handlers: str
    error: str | None
    traceback: str | None
    started_at: datetime
    finished_at: datetime


@dataclass(frozen=True)
class Attempting:
    """An attempt under way: its event, its number, the handlers it runs (every one that
    matches, named on its row), and when it started."""

    event: ClaimedEvent
    number: int
    routes: list[Route]
    started: datetime

    def row(
        self,
        outcome: str,
        finished: datetime,
        *,
        error: str | None = None,
        trace: str | None = None,
    ) -> AttemptRow:
        return AttemptRow(
            event_id=self.event.id,
            number=self.number,
            outcome=outcome,
            handlers=",".join(route.name for route in self.routes),
            error=error,
            traceback=trace,
            started_at=self.started,
            finished_at=finished,
        )


@dataclass(frozen=True)
class HandlerRun:
    """An attempt's handlers as they run: the event as they see it, its stale guard, and
    the routes that run (those with ``skip_stale`` are left out when the event is stale,
    asked only if one has it)."""

    view: EventView
    guard: StaleGuard
    running: list[Route]
    context: Context

    @classmethod
    def prepare(
        cls,
        session: Session,
        runtime: Runtime,
        attempting: Attempting,
        replay_id: int | None = None,
    ) -> HandlerRun:
        event, routes = attempting.event, attempting.routes
        view = _view(runtime, event)
        guard = StaleGuard(
            session, runtime.provider(event.provider), view, event.ordering_key, runtime.clock()
        )
        stale = guard.check() if any(route.skip_stale for route in routes) else None
        context = Context(
            session=session,
            idempotency_key=idempotency_key(event),
            attempt=attempting.number,
            is_replay=replay_id is not None,
            replay_id=replay_id,
            log=logging.LoggerAdapter(logging.getLogger("hooklatch.handlers"), {}),
            guard=guard,
        )
        running = [route for route in routes if not (stale and route.skip_stale)]
        return cls(view, guard, running, context)

    def run(self) -> None:
        """Every handler in a savepoint: an error undoes all their writes, not the claim."""
        if not self.running:
            return
        session = self.context.session
        savepoint = session.begin_nested()
        try:
            for route in self.running:
                route.handler(self.view, self.context)
            if _aborted(session):
                raise RuntimeError(
                    "a handler caught a database error and carried on; its writes are undone"
                )
            savepoint.commit()
        except BaseException:
            if savepoint.is_active:
                savepoint.rollback()  # ROLLBACK TO SAVEPOINT: also clears an aborted transaction
            raise

    def stale(self) -> Staleness | None:
        """Whether the event is stale, if the handlers (or ``skip_stale``) asked."""
        return self.guard.check() if self.guard.asked else None


class AttemptResult(NamedTuple):
    """What an attempt leaves: the event's status after it, its attempt row, and when it
    is tried again."""

    status: str
    attempt: AttemptRow
    next_attempt_at: datetime | None = None
    last_error: str | None = None


def attempt(session: Session, runtime: Runtime, event: ClaimedEvent) -> AttemptResult:
    """Run the claimed event's handlers once; the writes that record it are the caller's."""
    now = runtime.clock()
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, external_id=event.external_id):
        routes = runtime.router.handlers_for(event.provider, event.type)
        attempting = Attempting(event, event.attempts + 1, routes, now)
        if not routes:
            log.info("no handler for %s %s: marked ignored", event.provider, event.type)
            return AttemptResult(IGNORED, attempting.row(IGNORED, now))
        handlers = HandlerRun.prepare(session, runtime, attempting)
        try:
            handlers.run()
        except Exception as exc:
            return _failed(runtime, attempting, exc)
        finished = runtime.clock()
        stale = handlers.stale()
        if stale is not None:
            # Never dropped silently: ignored, with the reason on its attempt.
            log.info("%s: marked ignored", stale.reason)
            row = attempting.row(STALE, finished, error=stale.reason)
            return AttemptResult(IGNORED, row, last_error=stale.reason)
        handlers.guard.applied()
        return AttemptResult(PROCESSED, attempting.row(SUCCEEDED, finished))


def _failed(runtime: Runtime, attempting: Attempting, exc: Exception) -> AttemptResult:
    settings = runtime.settings
    now = runtime.clock()
    error = error_text(exc)
    row = attempting.row(FAILED, now, error=error, trace=traceback_text(exc))
    number = attempting.number
    if number >= settings.max_attempts:
        log.error("attempt %d failed, event is dead: %s", number, error)
        return AttemptResult(DEAD, row, last_error=error)
    delay = backoff(number, base=settings.retry_base_seconds, maximum=settings.retry_max_seconds)
    log.warning("attempt %d failed, retrying in %.1f s: %s", number, delay.total_seconds(), error)
    return AttemptResult(PENDING, row, next_attempt_at=now + delay, last_error=error)


class EventUpdate(TypedDict):
    """An event's new state after an attempt, as the chunk writes it."""

    id: int
    status: str
    attempts: int
    processed_at: datetime | None
    next_attempt_at: datetime | None
    last_error: str | None


class Activity(NamedTuple):
    """An attempt as the console's hourly counts take it."""

    endpoint_id: str
    status: str  # the event's, after the attempt
    received_at: datetime


@dataclass
class Writes:
    """The chunk's own writes, held back to the end: written per event, they would be
    flushed one by one as each next savepoint opens."""

    events: list[EventUpdate] = field(default_factory=list)
    attempts: list[AttemptRow] = field(default_factory=list)
    activity: list[Activity] = field(default_factory=list)
    # The events to hand on to the destinations they match (hooklatch.forwarding): those
    # whose handlers succeeded, or that no handler matched; never a stale one.
    forwarded: list[ClaimedEvent] = field(default_factory=list)

    def add(self, event: ClaimedEvent, result: AttemptResult) -> None:
        row = result.attempt
        finished = result.status in (PROCESSED, IGNORED)
        self.events.append(
            EventUpdate(
                id=event.id,
                status=result.status,
                attempts=row["number"],
                processed_at=row["finished_at"] if finished else None,
                next_attempt_at=result.next_attempt_at,
                last_error=result.last_error,
            )
        )
        self.attempts.append(row)
        self.activity.append(Activity(event.endpoint_id, result.status, event.received_at))
        if row["outcome"] in FORWARDED_OUTCOMES:
            self.forwarded.append(event)

    def apply(self, session: Session, now: datetime) -> list[Activity]:
        """Write them; returns what the console counts once the transaction commits."""
        activity = self.activity
        if self.events:
            session.execute(update(Event), self.events)
            session.execute(insert(Attempt), self.attempts)
            forwarding.record(session, self.forwarded, now)
        self.events, self.attempts, self.activity, self.forwarded = [], [], [], []
        return activity


def _view(runtime: Runtime, event: ClaimedEvent) -> EventView:
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
        repeats_event_id=event.repeats_event_id,
        conflicts_with_event_id=event.conflicts_with_event_id,
    )


def _aborted(session: Session) -> bool:
    """PostgreSQL refuses every statement after an error until a rollback."""
    driver = session.connection().connection.driver_connection
    info = getattr(driver, "info", None)
    return info is not None and info.transaction_status == TRANSACTION_STATUS_INERROR
