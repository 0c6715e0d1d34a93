"""The relay: outbox rows become queue jobs; due retries and lost dispatches go back out.

The outbox row *is* the work in hand. The relay pushes jobs, then marks the rows with
their job id in the same transaction: if it dies in between, the rows are still
waiting and are pushed again, and the duplicate job finds the events processed. The
worker deletes a row in the transaction that records its event's attempt; a row whose
job is gone waits again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy import delete, exists, func, insert, literal, select, update
from sqlalchemy.orm import Session

from app.db import UTCDateTime
from app.events.models import DEAD, PENDING, Attempt, Event, OutboxEntry, Replay
from app.runtime import Runtime

log = logging.getLogger(__name__)


@dataclass
class Batch:
    event_ids: list[int] = field(default_factory=list)
    replay_ids: list[int] = field(default_factory=list)
    job_id: str = ""


class Sink(Protocol):
    def push(self, batches: list[Batch]) -> None:
        """Hand the batches over and set each one's job_id; raise if that failed."""

    def after_commit(self, batches: list[Batch]) -> None: ...

    def in_flight(self, job_ids: list[str]) -> set[str]:
        """The job ids that are still queued or running."""

    def check(self, job_ids: list[str]) -> tuple[set[str], set[str]]:
        """(still queued or running, died while running: the process ended under it)."""


def chunk(ids: Sequence[int], size: int) -> list[list[int]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


# Lost-job candidates examined per sweep; the next sweep pages past those found alive.
SWEEP_JOBS = 500


class Relay:
    def __init__(self, runtime: Runtime, sink: Sink) -> None:
        self.runtime = runtime
        self.sink = sink
        self.settings = runtime.settings
        self._seen_alive: set[str] = set()

    def relay_once(self) -> int:
        """Hand one batch of waiting outbox rows to jobs. Returns how many rows were moved.

        The rows are marked with their job id only after the push succeeded, in the same
        transaction: if the relay dies in between, they are still waiting and are pushed
        again, and the duplicate job finds the events processed.
        """
        with self.runtime.session_factory.begin() as session:
            rows = session.execute(
                select(
                    OutboxEntry.id,
                    OutboxEntry.event_id,
                    OutboxEntry.replay_id,
                    OutboxEntry.lost_dispatches,
                )
                .where(OutboxEntry.job_id.is_(None))
                .order_by(OutboxEntry.id)
                .limit(self.settings.relay_batch_size)
                .with_for_update(skip_locked=True)
            ).all()
            if not rows:
                return 0
            # Work whose job was lost before goes out alone: if it is what kills the
            # process, it no longer takes a whole batch down with it.
            alone = {r.event_id for r in rows if r.replay_id is None and r.lost_dispatches}
            event_ids = list(dict.fromkeys(r.event_id for r in rows if r.replay_id is None))
            replay_ids = list(dict.fromkeys(r.replay_id for r in rows if r.replay_id is not None))
            shared = [i for i in event_ids if i not in alone]
            batches = [Batch(event_ids=ids) for ids in chunk(shared, self.settings.job_size)]
            batches += [Batch(event_ids=[i]) for i in event_ids if i in alone]
            batches += [Batch(replay_ids=[i]) for i in replay_ids]
            self.sink.push(batches)
            now = self.runtime.clock()
            for batch in batches:
                events, replays = set(batch.event_ids), set(batch.replay_ids)
                ids = [
                    r.id
                    for r in rows
                    if (r.replay_id in replays if r.replay_id is not None else r.event_id in events)
                ]
                session.execute(
                    update(OutboxEntry)
                    .where(OutboxEntry.id.in_(ids))
                    .values(job_id=batch.job_id, dispatched_at=now)
                )
        self.sink.after_commit(batches)
        return len(rows)

    def sweep_once(self) -> int:
        """Hand out again work whose job is gone, and queue retries that are due.

        Work whose job is still queued or running is left alone, so a healthy
        backlog is never enqueued twice.
        """
        return self._sweep_lost() + self._sweep_due()

    def _sweep_lost(self) -> int:
        """Outbox rows handed to a job that is neither queued nor running wait again. When
        the process died under the job, that counts against the rows (they then go out
        alone), and past HOOKLATCH_MAX_LOST_DISPATCHES their work is given up as dead."""
        cutoff = self.runtime.clock() - timedelta(seconds=self.settings.dispatch_grace_seconds)
        query = (
            select(OutboxEntry.job_id)
            .where(OutboxEntry.job_id.is_not(None), OutboxEntry.dispatched_at <= cutoff)
            .group_by(OutboxEntry.job_id)
            .order_by(func.min(OutboxEntry.dispatched_at))
            .limit(SWEEP_JOBS)
        )
        if self._seen_alive:  # page past the jobs the last sweep found alive
            query = query.where(OutboxEntry.job_id.not_in(sorted(self._seen_alive)))
        with self.runtime.session_factory() as session:
            job_ids = [j for j in session.scalars(query) if j]
        alive, died = self.sink.check(job_ids) if job_ids else (set(), set())
        self._seen_alive = alive if len(job_ids) == SWEEP_JOBS else set()
        lost = [j for j in job_ids if j not in alive]
        if not lost:
            return 0
        limit = self.settings.max_lost_dispatches
        killed = [j for j in lost if j in died]  # the process ended under these
        with self.runtime.session_factory.begin() as session:
            hopeless = session.execute(
                select(OutboxEntry.id, OutboxEntry.event_id, OutboxEntry.replay_id)
                .where(OutboxEntry.job_id.in_(killed), OutboxEntry.lost_dispatches + 1 >= limit)
                .with_for_update(skip_locked=True)
            ).all()
            if hopeless:
                self._give_up(session, hopeless)
            moved = 0
            for jobs, count in ((killed, 1), ([j for j in lost if j not in died], 0)):
                if jobs:
                    result: Any = session.execute(
                        update(OutboxEntry)
                        .where(OutboxEntry.job_id.in_(jobs))
                        .values(
                            job_id=None,
                            dispatched_at=None,
                            lost_dispatches=OutboxEntry.lost_dispatches + count,
                        )
                    )
                    moved += int(result.rowcount)
        log.info("re-dispatching %d outbox rows whose job is gone", moved)
        return moved + len(hopeless)

    def _give_up(self, session: Session, rows: Sequence[Any]) -> None:
        """Each of these jobs died without recording anything, too many times."""
        now = self.runtime.clock()
        error = (
            f"its job was lost {self.settings.max_lost_dispatches} times without recording an "
            "attempt: the process running the handler died (out of memory, a job timeout, "
            "a crash)"
        )
        for row in rows:
            if row.replay_id is not None:
                session.execute(
                    update(Replay)
                    .where(Replay.id == row.replay_id, Replay.status == PENDING)
                    .values(status="failed", error=error, finished_at=now)
                )
                continue
            event = session.scalars(
                select(Event)
                .where(Event.id == row.event_id, Event.status == PENDING)
                .with_for_update(skip_locked=True)
            ).one_or_none()
            if event is None:
                continue
            event.attempts += 1
            event.status, event.next_attempt_at, event.last_error = DEAD, None, error
            session.add(
                Attempt(
                    event_id=event.id,
                    number=event.attempts,
                    outcome="failed",
                    handlers="",
                    error=error,
                    started_at=now,
                    finished_at=now,
                )
            )
            log.error("event %d is dead: %s", event.id, error)
        session.execute(delete(OutboxEntry).where(OutboxEntry.id.in_([r.id for r in rows])))

    def _sweep_due(self) -> int:
        """Pending work with no outbox row (retries come due, rows a job let go) gets one."""
        now = self.runtime.clock()
        limit = self.settings.relay_batch_size
        with self.runtime.session_factory.begin() as session:
            events = session.execute(
                insert(OutboxEntry).from_select(
                    ["event_id", "created_at"],
                    select(Event.id, literal(now, UTCDateTime()))
                    .where(
                        Event.status == PENDING,
                        Event.next_attempt_at <= now,
                        ~exists().where(
                            OutboxEntry.event_id == Event.id, OutboxEntry.replay_id.is_(None)
                        ),
                    )
                    .limit(limit),
                )
            )
            replays = session.execute(
                insert(OutboxEntry).from_select(
                    ["event_id", "replay_id", "created_at"],
                    select(Replay.event_id, Replay.id, literal(now, UTCDateTime()))
                    .where(
                        Replay.status == PENDING,
                        ~exists().where(OutboxEntry.replay_id == Replay.id),
                    )
                    .limit(limit),
                )
            )
            moved = int(events.rowcount) + int(replays.rowcount)
        if moved:
            log.info("queued %d due retries or released events", moved)
        return moved

    def run(self, stop: threading.Event, *, wake: threading.Event | None = None) -> None:
        """Relay until ``stop`` is set: every poll interval, or at once on ``wake``."""
        last_sweep = 0.0
        failures = 0
        while not stop.is_set():
            try:
                moved = self.relay_once()
                now = self.runtime.clock().timestamp()
                if now - last_sweep >= self.settings.sweep_interval_seconds:
                    last_sweep = now
                    moved += self.sweep_once()
                failures = 0
            except Exception as exc:  # Redis or the database is away: keep the rows, retry
                failures += 1
                delay = min(0.5 * 2**failures, 10.0)
                log.error(
                    "relay pass failed (%s: %s), retrying in %.1f s", type(exc).__name__, exc, delay
                )
                stop.wait(delay)
                continue
            if moved >= self.settings.relay_batch_size:
                continue
            # Polling, not LISTEN/NOTIFY: a NOTIFY would serialise every ingest commit.
            # A pass costs about the same for one row as for hundreds, so under a burst
            # each poll moves everything committed since the last one.
            timeout = min(self.settings.relay_poll_seconds, self.settings.sweep_interval_seconds)
            if wake is not None:
                wake.wait(timeout)
                wake.clear()
            else:
                stop.wait(timeout)
