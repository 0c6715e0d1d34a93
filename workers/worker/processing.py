"""Running handlers for a chunk of events, in the caller's transaction.

Each unkeyed event is claimed by a row lock (``FOR UPDATE SKIP LOCKED``), each keyed one
under its key's lock (``keyed``), and its handlers run in a savepoint, so one failure
undoes only that event's writes. Nothing here commits: the job
(``hooklatch.workers.worker.jobs``) owns the transaction.
"""

from __future__ import annotations

import logging
import secrets
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from psycopg2.extensions import TRANSACTION_STATUS_INERROR
from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.orm import Session

from hooklatch.events.models import DEAD, IGNORED, PENDING, PROCESSED, Attempt, Event, OutboxEntry
from hooklatch.events.payloads import Payloads, claim_columns
from hooklatch.handlers import Context, EventView, Route
from hooklatch.logs import bind
from hooklatch.metrics import EventTally
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef
from hooklatch.ordering.stale import StaleGuard, Staleness
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.keyed import Drain, run_keyed

log = logging.getLogger(__name__)

SUCCEEDED = "succeeded"
FAILED = "failed"
STALE = "stale"  # older than its key's newest applied event: ignored, with the reason
_random = secrets.SystemRandom()

# A chunk starts no further event once it has run this long: the per-event cost of a
# transaction (claim, commit, outbox delete) is shared, while locks stay short and effects
# become visible soon. (A slow handler still holds its chunk's earlier events until it
# returns.)
TRANSACTION_SECONDS = 0.25


class ClaimedEvent(Protocol):
    """An event as it runs: a claimed row with its payload (``LoadedEvent``), or an Event."""

    @property
    def id(self) -> int: ...
    @property
    def endpoint_id(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def external_id(self) -> str: ...
    @property
    def attempts(self) -> int: ...
    @property
    def body(self) -> bytes | None: ...
    @property
    def headers(self) -> dict[str, str] | None: ...
    @property
    def received_at(self) -> datetime: ...
    @property
    def next_attempt_at(self) -> datetime | None: ...
    @property
    def occurred_at(self) -> datetime | None: ...
    @property
    def ordering_key(self) -> str | None: ...
    @property
    def repeats_event_id(self) -> int | None: ...
    @property
    def variant(self) -> str: ...
    @property
    def conflicts_with_event_id(self) -> int | None: ...


# How much of a conflicting delivery's body digest its idempotency key carries.
VARIANT_IN_KEY = 16


def idempotency_key(event: ClaimedEvent) -> str:
    """The same on every attempt and replay of an event. A conflicting delivery (another
    body under a stored event's id) adds its body digest's first hex digits, so that a
    system downstream does not take it for the event it conflicts with."""
    key = f"hooklatch:{event.endpoint_id}:{event.external_id}"
    return f"{key}:{event.variant[:VARIANT_IN_KEY]}" if event.variant else key


def backoff(attempt: int, *, base: float, maximum: float) -> timedelta:
    """Exponential backoff with jitter: between half and all of base * 2^(attempt-1)."""
    ceiling = min(maximum, base * 2 ** (attempt - 1))
    return timedelta(seconds=_random.uniform(ceiling / 2, ceiling))


def process_chunk(
    session: Session,
    runtime: Runtime,
    event_ids: list[int],
    counts: Counter[str],
    tally: EventTally | None = None,
    seen: list[tuple[str, str, datetime]] | None = None,
    drain: Drain | None = None,
) -> tuple[list[int], list[int]]:
    """Run the handlers of each of these events that is pending and due, once.

    Returns the ids dealt with (run, or settled elsewhere: processed already, not due,
    held by another worker right now, or waiting behind their key) and those left for
    the next transaction because this one has run long enough. Unkeyed events are claimed
    by their row locks here; keyed ones under their key's lock (``keyed``), which may run
    more of the key's events than the job brought. Each outcome goes to ``tally``
    (metrics) and ``seen`` (endpoint id, status after the attempt, time received: the
    console's hourly activity), which the caller records once the transaction has committed.
    """
    now = runtime.clock()
    states = claims.chunk_states(session, event_ids)
    claimed = _claim(session, [i for i in event_ids if _runnable(states.get(i), now)], now)
    payloads = Payloads(session, runtime.settings.worker_body_bytes)
    payloads.expect(states[i] for i in event_ids if i in claimed)
    writes = _Writes()
    started = time.monotonic()

    def step(row: Any) -> str:
        # The payload is read here, and dropped with the event's view when this returns.
        outcome = _process_tallied(session, runtime, payloads.take(row), writes, tally)
        counts[outcome] += 1
        return outcome

    done: list[int] = []
    left: list[int] = []
    unclaimed: list[int] = []
    for position, event_id in enumerate(event_ids):
        if done and time.monotonic() - started > TRANSACTION_SECONDS:
            left = event_ids[position:]
            break
        event = claimed.get(event_id)
        if event is None:
            unclaimed.append(event_id)
            continue
        step(event)
        done.append(event_id)
    wake: list[KeyRef] = []
    if unclaimed:
        keyed = run_keyed(
            session,
            runtime,
            unclaimed,
            states,
            step,
            payloads,
            deadline=started + TRANSACTION_SECONDS,
            drain=drain or Drain(),
            ran_before=bool(done),
        )
        counts["skipped"] += len(set(keyed.done) - set(keyed.ran))
        done += keyed.done
        left += keyed.left
        wake = keyed.wake
    writes.apply(session, seen)
    for ref in wake:
        claims.wake(session, ref, now=runtime.clock())
    return done, left


def _claim(session: Session, event_ids: list[int], now: datetime) -> dict[int, Any]:
    """Lock these unkeyed events (found pending and due by ``claims.chunk_states``) by
    primary key, and keep those still pending and due as locked: another worker may have
    run one since. Rows already locked are someone else's right now. Their payloads are
    not read here, but as they run (``Payloads``)."""
    if not event_ids:
        return {}
    rows = session.execute(
        select(*claim_columns())
        .where(Event.id.in_(event_ids), Event.ordering_key.is_(None))
        .order_by(Event.id)
        .with_for_update(skip_locked=True)
    )
    return {row.id: row for row in rows if _runnable(row, now)}


def _runnable(row: Any, now: datetime) -> bool:
    """Unkeyed, pending and due."""
    return (
        row is not None
        and row.ordering_key is None
        and row.status == PENDING
        and row.next_attempt_at is not None
        and row.next_attempt_at <= now
    )


def release_outbox_rows(session: Session, event_ids: list[int], job_id: str) -> None:
    """Delete the outbox rows of events dealt with: this job's, and rows not handed out
    yet (a relay that has pushed this job but not committed yet holds them, and this
    waits for it). A pending event that still needs a row gets a new one from the sweep."""
    session.execute(
        delete(OutboxEntry).where(
            OutboxEntry.event_id.in_(event_ids),
            OutboxEntry.replay_id.is_(None),
            or_(OutboxEntry.job_id == job_id, OutboxEntry.job_id.is_(None)),
        )
    )


def run_handlers(
    session: Session,
    runtime: Runtime,
    event: ClaimedEvent,
    routes: list[Route],
    context: Context,
    view: EventView | None = None,
) -> None:
    """Run every handler in a savepoint: an error undoes all their writes, not the claim."""
    view = view or _view(runtime, event)
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


def context_for(
    session: Session,
    event: ClaimedEvent,
    number: int,
    *,
    replay_id: int | None = None,
    guard: StaleGuard | None = None,
) -> Context:
    return Context(
        session=session,
        idempotency_key=idempotency_key(event),
        attempt=number,
        is_replay=replay_id is not None,
        replay_id=replay_id,
        log=logging.LoggerAdapter(logging.getLogger("hooklatch.handlers"), {}),
        guard=guard,
    )


def guarded(
    session: Session, runtime: Runtime, event: ClaimedEvent, routes: list[Route]
) -> tuple[EventView, StaleGuard, list[Route], Staleness | None]:
    """The event as handlers see it, its stale guard, and the routes to run: those with
    ``skip_stale`` are left out when the event is stale (asked only if one has it)."""
    view = _view(runtime, event)
    guard = StaleGuard(
        session, runtime.provider(event.provider), view, event.ordering_key, runtime.clock()
    )
    stale = guard.check() if any(route.skip_stale for route in routes) else None
    running = [route for route in routes if not (stale and route.skip_stale)]
    return view, guard, running, stale


def error_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:4000]
    return text.replace("\x00", "\\x00")  # PostgreSQL text cannot hold NUL


# The most of a traceback an attempt keeps: its innermost frames, where the error is.
TRACEBACK_CHARS = 16_000


def traceback_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc)).strip()
    if len(text) > TRACEBACK_CHARS:
        text = "...\n" + text[-TRACEBACK_CHARS:]
    return text.replace("\x00", "\\x00")


def attempt_row(
    event: ClaimedEvent,
    number: int,
    outcome: str,
    routes: list[Route],
    started: datetime,
    now: datetime,
    *,
    error: str | None = None,
    trace: str | None = None,
) -> dict[str, Any]:
    return {
        "event_id": event.id,
        "number": number,
        "outcome": outcome,
        "handlers": ",".join(route.name for route in routes),
        "error": error,
        "traceback": trace,
        "started_at": started,
        "finished_at": now,
    }


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


@dataclass
class _Writes:
    """The chunk's own writes, held back to the end: written per event, they would be
    flushed one by one as each next savepoint opens."""

    events: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    # (endpoint id, status after the attempt, received): the console's hourly activity.
    outcomes: list[tuple[str, str, datetime]] = field(default_factory=list)

    def add(
        self,
        event: ClaimedEvent,
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
        self.outcomes.append((event.endpoint_id, status, event.received_at))

    def apply(self, session: Session, seen: list[tuple[str, str, datetime]] | None) -> None:
        if self.events:
            session.execute(update(Event), self.events)
            session.execute(insert(Attempt), self.attempts)
            if seen is not None:
                seen.extend(self.outcomes)
        self.events, self.attempts, self.outcomes = [], [], []


def _process_tallied(
    session: Session,
    runtime: Runtime,
    event: ClaimedEvent,
    writes: _Writes,
    tally: EventTally | None,
) -> str:
    started, began = runtime.clock(), time.monotonic()
    outcome = _process_claimed(session, runtime, event, writes)
    if tally is not None:
        # Due since it was stored (received_at), or since its retry, or its re-arming
        # by a duplicate delivery, made it due (next_attempt_at).
        due = max(event.received_at, event.next_attempt_at or event.received_at)
        tally.add(
            provider=event.provider,
            status=outcome,
            handler_seconds=None if outcome == IGNORED else time.monotonic() - began,
            first_attempt=event.attempts == 0,
            due=due,
            started=started,
        )
    return outcome


def _process_claimed(
    session: Session, runtime: Runtime, event: ClaimedEvent, writes: _Writes
) -> str:
    now = runtime.clock()
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, external_id=event.external_id):
        routes = runtime.router.handlers_for(event.provider, event.type)
        number = event.attempts + 1
        if not routes:
            writes.add(event, IGNORED, attempt_row(event, number, IGNORED, routes, now, now))
            log.info("no handler for %s %s: marked ignored", event.provider, event.type)
            return IGNORED
        view, guard, running, stale = guarded(session, runtime, event, routes)
        context = context_for(session, event, number, guard=guard)
        try:
            if running:
                run_handlers(session, runtime, event, running, context, view)
        except Exception as exc:
            return _failed(runtime, event, number, routes, exc, now, writes)
        finished = runtime.clock()
        stale = guard.check() if guard.asked else None
        if stale is not None:
            # Never dropped silently: ignored, with the reason on its attempt.
            attempt = attempt_row(event, number, STALE, routes, now, finished, error=stale.reason)
            writes.add(event, IGNORED, attempt, last_error=stale.reason)
            log.info("%s: marked ignored", stale.reason)
            return IGNORED
        guard.applied()
        writes.add(event, PROCESSED, attempt_row(event, number, SUCCEEDED, routes, now, finished))
        return PROCESSED


def _failed(
    runtime: Runtime,
    event: ClaimedEvent,
    number: int,
    routes: list[Route],
    exc: Exception,
    started: datetime,
    writes: _Writes,
) -> str:
    settings = runtime.settings
    now = runtime.clock()
    error = error_text(exc)
    attempt = attempt_row(
        event, number, FAILED, routes, started, now, error=error, trace=traceback_text(exc)
    )
    if number >= settings.max_attempts:
        writes.add(event, DEAD, attempt, last_error=error)
        log.error("attempt %d failed, event is dead: %s", number, error)
        return DEAD
    delay = backoff(number, base=settings.retry_base_seconds, maximum=settings.retry_max_seconds)
    writes.add(event, PENDING, attempt, next_attempt_at=now + delay, last_error=error)
    log.warning("attempt %d failed, retrying in %.1f s: %s", number, delay.total_seconds(), error)
    return PENDING
