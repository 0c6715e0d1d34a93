"""The relay's sweep: work whose job is gone goes out again, and due retries get a row.

Every HOOKLATCH_SWEEP_INTERVAL_SECONDS each relay asks its sink which of the jobs that
hold outbox rows are still queued or running (docs/architecture.md, "Lost dispatches").
The outbox rows of a lost job are handed out again; a job that died under its process
counts against its rows, which then go out alone, and past
HOOKLATCH_MAX_LOST_DISPATCHES their events are given up as dead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import Row, delete, exists, func, insert, literal, select, tuple_, update
from sqlalchemy.orm import Session

from hooklatch.db import UTCDateTime
from hooklatch.endpoints.ordering import PARK
from hooklatch.events.models import API, DEAD, PENDING, Attempt, Event, OutboxEntry, Replay
from hooklatch.ordering import claims
from hooklatch.ordering.claims import fifo_key, may_be_queued
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.sinks import Sink, Verdicts

log = logging.getLogger(__name__)

# An outbox row whose job died too many times: id, event_id, replay_id.
HopelessRow = Row[int, int, int | None]

# Lost-job candidates examined per sweep, oldest first; the next sweep goes on after the
# last one, and starts again from the oldest once a page comes back short.
SWEEP_JOBS = 500


class Sweep:
    def __init__(self, runtime: Runtime, sink: Sink) -> None:
        self.runtime = runtime
        self.sink = sink
        self.settings = runtime.settings
        self.page = SWEEP_JOBS
        self._cursor: tuple[datetime, str] | None = None
        self._suspects: set[str] = set()

    def once(self) -> int:
        """Hand out again work whose job is gone, and queue retries that are due.

        Work whose job is still queued or running is left alone, so a healthy
        backlog is never enqueued twice.
        """
        return self._sweep_lost() + self._sweep_due()

    def _sweep_lost(self) -> int:
        """Outbox rows handed to a job that is neither queued nor running wait again. When
        the process died under the job, that counts against the rows (they then go out
        alone), and past HOOKLATCH_MAX_LOST_DISPATCHES their work is given up as dead."""
        verdicts, job_ids = self._check_a_page()
        lost = [j for j in job_ids if j not in verdicts.alive and j not in verdicts.suspects]
        if not lost:
            return 0
        died = verdicts.died
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
                    result = session.execute(
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

    def _check_a_page(self) -> tuple[Verdicts, list[str]]:
        """Ask the sink about a page of jobs handed out longer than the grace ago, and
        about the suspects of the last sweep, whichever page they were on."""
        cutoff = self.runtime.clock() - timedelta(seconds=self.settings.dispatch_grace_seconds)
        first = func.min(OutboxEntry.dispatched_at)
        query = (
            select(OutboxEntry.job_id, first)
            .where(OutboxEntry.job_id.is_not(None), OutboxEntry.dispatched_at <= cutoff)
            .group_by(OutboxEntry.job_id)
            .order_by(first, OutboxEntry.job_id)
            .limit(self.page)
        )
        if self._cursor is not None:
            after = tuple_(literal(self._cursor[0], UTCDateTime()), literal(self._cursor[1]))
            query = query.having(tuple_(first, OutboxEntry.job_id) > after)
        with self.runtime.session_factory() as session:
            page = session.execute(query).all()
        self._cursor = (page[-1][1], page[-1][0]) if len(page) == self.page else None
        job_ids = list(dict.fromkeys([*(row[0] for row in page), *sorted(self._suspects)]))
        verdicts = self.sink.check(job_ids) if job_ids else Verdicts()
        self._suspects = verdicts.suspects
        return verdicts, job_ids

    def _give_up(self, session: Session, rows: Sequence[HopelessRow]) -> None:
        """Each of these jobs died without recording anything, too many times. An event a
        worker holds right now keeps its row, and its count, until a later sweep."""
        now = self.runtime.clock()
        held: set[int] = set()
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
            fifo = fifo_key(session, row.event_id)
            if fifo is not None and not claims.try_key_locks(session, [fifo[0]]):
                held.add(row.id)  # its key's holder may be running it: a later sweep
                continue
            event = session.scalars(
                select(Event)
                .where(Event.id == row.event_id, Event.status == PENDING)
                .with_for_update(skip_locked=True)
            ).one_or_none()
            if event is None:
                still = select(Event.status).where(Event.id == row.event_id)
                if session.scalar(still) == PENDING:
                    held.add(row.id)
                continue
            if fifo is not None and fifo[1] == PARK:
                claims.park(session, fifo[0], event.id, now=now)
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
        gone = [r.id for r in rows if r.id not in held]
        session.execute(delete(OutboxEntry).where(OutboxEntry.id.in_(gone)))

    def _sweep_due(self) -> int:
        """Pending work with no outbox row (retries come due, rows a job let go) gets one."""
        now = self.runtime.clock()
        limit = self.settings.relay_batch_size
        # Each candidate's outbox row is looked up by its own index, one probe per row.
        # Left to join the two tables as it sees fit, PostgreSQL without statistics (a
        # backlog swept before autovacuum analyses it) ran the whole outbox once per
        # pending event. OFFSET 0 keeps the subquery from being turned into a join.
        has_row = exists(
            select(OutboxEntry.id)
            .where(OutboxEntry.event_id == Event.id, OutboxEntry.replay_id.is_(None))
            .offset(0)
        )
        has_replay_row = exists(
            select(OutboxEntry.id).where(OutboxEntry.replay_id == Replay.id).offset(0)
        )
        with self.runtime.session_factory.begin() as session:
            events = session.execute(
                insert(OutboxEntry).from_select(
                    ["event_id", "created_at", "fetched"],
                    # A reconcile's event keeps to the fetched lane (held, or retried).
                    select(Event.id, literal(now, UTCDateTime()), Event.origin == API)
                    .where(
                        Event.status == PENDING,
                        Event.next_attempt_at <= now,
                        ~has_row,
                        may_be_queued(),
                    )
                    .limit(limit),
                )
            )
            replays = session.execute(
                insert(OutboxEntry).from_select(
                    ["event_id", "replay_id", "created_at"],
                    select(Replay.event_id, Replay.id, literal(now, UTCDateTime()))
                    .where(Replay.status == PENDING, ~has_replay_row)
                    .limit(limit),
                )
            )
            moved = int(events.rowcount) + int(replays.rowcount)
        if moved:
            log.info("queued %d due retries or released events", moved)
        return moved
