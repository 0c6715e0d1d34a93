"""The relay: outbox rows become queue jobs; due retries and lost dispatches go back out.

The outbox row *is* the work in hand. The relay pushes jobs, then marks the rows with
their job id in the same transaction: if it dies in between, the rows are still
waiting and are pushed again, and the duplicate job finds the events processed. The
worker deletes a row in the transaction that records its event's attempt; a row whose
job is gone waits again.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

from sqlalchemy import ColumnElement, Row, and_, select, true, update
from sqlalchemy.orm import Session

from hooklatch.db import reconnect_delay
from hooklatch.events.models import OutboxEntry
from hooklatch.jobs import FETCHED_JOB_SIZE, Handoff
from hooklatch.logs import one_line
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.sinks import Sink
from hooklatch.workers.relay.sweep import Sweep

log = logging.getLogger(__name__)

# An outbox row as the relay reads it: id, event_id, replay_id, lost_dispatches.
WaitingRow = Row[int, int, int | None, int]

# The outbox rows of each lane: live events', the events' a reconcile fetched, replays'.
# Each matches a partial index of the waiting rows (hooklatch.events.models).
LIVE = and_(OutboxEntry.replay_id.is_(None), ~OutboxEntry.fetched)
FETCHED = OutboxEntry.fetched == true()
REPLAYS = OutboxEntry.replay_id.is_not(None)


def chunk(ids: Sequence[int], size: int) -> list[list[int]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


class Relay:
    def __init__(self, runtime: Runtime, sink: Sink) -> None:
        self.runtime = runtime
        self.sink = sink
        self.settings = runtime.settings
        self.sweep = Sweep(runtime, sink)

    def relay_once(self) -> int:
        """Hand a pass's waiting outbox rows to jobs. Returns how many rows were moved.

        The rows are marked with their job id only after the push succeeded, in the same
        transaction: if the relay dies in between, they are still waiting and are pushed
        again, and the duplicate job finds the events processed.

        Events go to the live queue; those a reconcile fetched go to the fetched queue and
        replays to the replay queue, which workers read after it: a catch-up of thousands
        never stands in front of a live event. Nothing is handed to a queue while
        ``queued_jobs`` jobs wait in it: its rows stay in the outbox and go out together
        once one is taken. A job costs a
        worker a few round trips whatever its size, so jobs cut at each poll (a few events
        each under a steady trickle, hundreds of them after an outage) held the workers to
        a few hundred events a second; held back, a job carries what arrived while the
        workers were busy, up to ``job_size``.
        """
        waiting = self.sink.waiting()
        room = self.settings.queued_jobs
        lanes = [
            (which, fetched)
            for which, fetched, jobs in (
                (LIVE, False, waiting.live),
                (FETCHED, True, waiting.fetched),
                (REPLAYS, False, waiting.replays),
            )
            if jobs < room
        ]
        if not lanes:
            return 0
        with self.runtime.session_factory.begin() as session:
            taken = [(self._waiting_rows(session, which), fetched) for which, fetched in lanes]
            handed = [(rows, self._handoffs(rows, fetched=fetched)) for rows, fetched in taken]
            handoffs = [handoff for _, made in handed for handoff in made]
            if not handoffs:
                return 0
            self.sink.push(handoffs)
            for rows, made in handed:
                self._mark(session, rows, made)
        self.sink.after_commit(handoffs)
        return sum(len(rows) for rows, _ in handed)

    def _waiting_rows(self, session: Session, which: ColumnElement[bool]) -> list[WaitingRow]:
        """A lane's rows not handed to a job yet, oldest first, each lane through its own
        index: a live backlog may be long and the replays few, and a reconcile's catch-up
        leaves thousands of fetched rows waiting while live ones keep coming."""
        return list(
            session.execute(
                select(
                    OutboxEntry.id,
                    OutboxEntry.event_id,
                    OutboxEntry.replay_id,
                    OutboxEntry.lost_dispatches,
                )
                .where(OutboxEntry.job_id.is_(None), which)
                .order_by(OutboxEntry.id)
                .limit(self.settings.relay_batch_size)
                .with_for_update(skip_locked=True)
            ).all()
        )

    def _handoffs(self, rows: Sequence[WaitingRow], *, fetched: bool) -> list[Handoff]:
        """Events in jobs of up to ``job_size``, replays in jobs of their own of up to as
        many. Work whose job was lost before goes out alone: if it is what kills the
        process, it no longer takes a whole job's work down with it. Fetched events go in
        jobs of up to ``FETCHED_JOB_SIZE``."""
        size = min(self.settings.job_size, FETCHED_JOB_SIZE) if fetched else self.settings.job_size
        events = list(dict.fromkeys(r.event_id for r in rows if r.replay_id is None))
        replays = list(dict.fromkeys(r.replay_id for r in rows if r.replay_id is not None))
        alone = {r.event_id for r in rows if r.replay_id is None and r.lost_dispatches}
        alone_replays = {r.replay_id for r in rows if r.replay_id is not None and r.lost_dispatches}
        handoffs = [
            Handoff(event_ids=ids, fetched=fetched)
            for ids in chunk([i for i in events if i not in alone], size)
        ]
        handoffs += [Handoff(event_ids=[i], fetched=fetched) for i in events if i in alone]
        shared = [i for i in replays if i not in alone_replays]
        handoffs += [Handoff(replay_ids=ids) for ids in chunk(shared, size)]
        handoffs += [Handoff(replay_ids=[i]) for i in replays if i in alone_replays]
        return handoffs

    def _mark(self, session: Session, rows: Sequence[WaitingRow], handoffs: list[Handoff]) -> None:
        """Each row gets the job it was pushed in."""
        now = self.runtime.clock()
        for handoff in handoffs:
            events, replays = set(handoff.event_ids), set(handoff.replay_ids)
            ids = [
                r.id
                for r in rows
                if (r.replay_id in replays if r.replay_id is not None else r.event_id in events)
            ]
            session.execute(
                update(OutboxEntry)
                .where(OutboxEntry.id.in_(ids))
                .values(job_id=handoff.job_id, dispatched_at=now)
            )

    def sweep_once(self) -> int:
        """Hand out again work whose job is gone, and queue retries that are due."""
        return self.sweep.once()

    def run(self, stop: threading.Event, *, wake: threading.Event | None = None) -> None:
        """Relay until ``stop`` is set: every poll interval, or at once on ``wake``."""
        last_sweep = -math.inf
        failures = 0
        while not stop.is_set():
            try:
                moved = self.relay_once()
                now = time.monotonic()  # a wall clock set back must not pause the sweeps
                if now - last_sweep >= self.settings.sweep_interval_seconds:
                    last_sweep = now
                    moved += self.sweep_once()
                failures = 0
            except Exception as exc:  # Redis or the database is away: keep the rows, retry
                failures += 1
                delay = reconnect_delay(failures)
                log.error("relay pass failed (%s), retrying in %.1f s", one_line(exc), delay)
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
