"""Running a replay: an event's handlers again, whatever its state, in the caller's
transaction."""

from __future__ import annotations

import logging
from typing import NamedTuple

from sqlalchemy import delete, func, or_, select
from sqlalchemy.orm import Session

from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import NONE
from hooklatch.events.models import (
    DEAD,
    PENDING,
    PROCESSED,
    Attempt,
    Event,
    OutboxEntry,
    Replay,
)
from hooklatch.forwarding import record as forwarding
from hooklatch.logs import bind
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.attempts import (
    FAILED,
    STALE,
    SUCCEEDED,
    Attempting,
    HandlerRun,
    error_text,
    traceback_text,
)

log = logging.getLogger(__name__)

# A replay whose event's handlers ran after it was asked for: not run again.
SKIPPED = "skipped"


class ReplayResult(NamedTuple):
    """A replay's outcome: None when the replay is not pending (done, or another worker's
    right now), or when its event was processed since it was asked for (it is then marked
    skipped). ``held``: the key whose lock it took, which the caller looks at again once
    committed (``keyed.look_again``)."""

    outcome: str | None
    held: KeyRef | None = None


def process_replay(session: Session, runtime: Runtime, replay_id: int) -> ReplayResult:
    """Run the replay's event's handlers. A replay and a normal attempt of one event never
    overlap: the event's row lock is waited for."""
    replay = session.scalars(
        select(Replay)
        .where(Replay.id == replay_id, Replay.status == PENDING)
        .with_for_update(skip_locked=True)
    ).one_or_none()
    if replay is None:
        return ReplayResult(None)
    ref = _ordered_key(session, replay.event_id)
    if ref is not None:
        # Never beside another event of its key: wait for the key as for the row.
        claims.wait_key_lock(session, ref)
    return ReplayResult(_replay(session, runtime, replay, ref), ref)


def _replay(session: Session, runtime: Runtime, replay: Replay, ref: KeyRef | None) -> str | None:
    """The replay, under its event's row lock (and its key's, ``ref``): its outcome."""
    event = session.scalars(
        select(Event).where(Event.id == replay.event_id).with_for_update()
    ).one()
    was_dead = event.status == DEAD
    with bind(event_id=event.id, endpoint_id=event.endpoint_id, replay_id=replay.id):
        if _processed_since(session, event, replay):
            # Asked for while dead, then re-armed by the provider's retry, which ran first:
            # the handlers the replay was for have run once already.
            replay.status, replay.finished_at = SKIPPED, runtime.clock()
            replay.error = "its event was processed after this replay was asked for"
            log.info("replay %d skipped: %s", replay.id, replay.error)
            return None
        if event.body is None:
            # Retention leaves an event with a replay waiting alone; this is a payload
            # removed by other means. Handlers never see an empty body in its place.
            replay.status, replay.finished_at = FAILED, runtime.clock()
            replay.error = "the event's body and headers were deleted: it cannot run again"
            log.warning("replay %d failed: %s", replay.id, replay.error)
            return FAILED
        started = runtime.clock()
        number = 1 + (session.scalar(select(func.count()).where(Attempt.event_id == event.id)) or 0)
        routes = runtime.router.handlers_for(event.provider, event.type)
        attempting = Attempting(event, number, routes, started)
        handlers = HandlerRun.prepare(session, runtime, attempting, replay_id=replay.id)
        trace = None
        try:
            handlers.run()
        except Exception as exc:
            replay.status, replay.error = FAILED, error_text(exc)
            trace = traceback_text(exc)
            outcome: str = FAILED
            log.warning("replay %d failed: %s", replay.id, replay.error)
        else:
            stale = handlers.stale()
            if stale is not None:
                # An older state replayed stays older: the event keeps its status.
                replay.status = outcome = STALE
                replay.error = stale.reason
                log.info("replay %d: %s", replay.id, stale.reason)
            else:
                replay.status = outcome = SUCCEEDED
                handlers.guard.applied()
            if routes and stale is None:
                finished = runtime.clock()
                event.status, event.processed_at = PROCESSED, finished
                event.next_attempt_at, event.last_error = None, None
                # A dead event that now ran is forwarded as any processed one; an event
                # forwarded already is not again (a forward is re-sent by its own replay).
                forwarding.record(session, [event], finished)
                if ref is not None and was_dead:
                    # A dead event that parked its key no longer does: the key goes on.
                    claims.wake(session, ref, now=finished)
        replay.finished_at = runtime.clock()
        error = None if outcome == SUCCEEDED else replay.error
        row = attempting.row(outcome, replay.finished_at, error=error, trace=trace)
        session.add(Attempt(**row, replay_id=replay.id))
        return outcome


def _processed_since(session: Session, event: Event, replay: Replay) -> bool:
    """Whether an attempt (not a replay) processed the event after the replay was asked
    for. Attempts' ids tell which came later, whatever the clocks of the hosts that wrote
    them: the request waited for any attempt under way (the event's row lock)."""
    if event.status != PROCESSED or replay.after_attempt_id is None:
        return False  # asked for before replays recorded it (migration 0014): runs
    later = select(Attempt.id).where(
        Attempt.event_id == event.id,
        Attempt.replay_id.is_(None),
        Attempt.outcome == SUCCEEDED,
        Attempt.id > replay.after_attempt_id,
    )
    return session.scalar(later.limit(1)) is not None


def _ordered_key(session: Session, event_id: int) -> KeyRef | None:
    """The event's key, if its endpoint orders its events."""
    row = session.execute(
        select(Event.endpoint_id, Event.ordering_key, Endpoint.ordering)
        .join(Endpoint, Endpoint.id == Event.endpoint_id)
        .where(Event.id == event_id)
    ).one()
    if row.ordering_key is None or row.ordering == NONE:
        return None
    return KeyRef(row.endpoint_id, row.ordering_key)


def release_replay_rows(session: Session, replay_id: int, job_id: str) -> None:
    """Delete the replay's outbox rows: this job's, and rows not handed out yet."""
    session.execute(
        delete(OutboxEntry).where(
            OutboxEntry.replay_id == replay_id,
            or_(OutboxEntry.job_id == job_id, OutboxEntry.job_id.is_(None)),
        )
    )
