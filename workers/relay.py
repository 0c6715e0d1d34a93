"""The relay: outbox rows become queue jobs; due retries and lost dispatches go back out.

The outbox row *is* the enqueued work. The relay pushes jobs and deletes the rows
in one transaction: if it dies in between, the rows stay and are pushed again,
and the duplicate job finds the events already processed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy import ColumnElement, delete, exists, insert, or_, select, update
from sqlalchemy.orm import Session

from app.events.models import PENDING, Event, OutboxEntry, Replay
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


def chunk(ids: Sequence[int], size: int) -> list[list[int]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


class Relay:
    def __init__(self, runtime: Runtime, sink: Sink) -> None:
        self.runtime = runtime
        self.sink = sink
        self.settings = runtime.settings

    def relay_once(self) -> int:
        """Move one batch of outbox rows into jobs. Returns how many rows were moved."""
        with self.runtime.session_factory.begin() as session:
            rows = session.execute(
                select(OutboxEntry.id, OutboxEntry.event_id, OutboxEntry.replay_id)
                .order_by(OutboxEntry.id)
                .limit(self.settings.relay_batch_size)
                .with_for_update(skip_locked=True)
            ).all()
            if not rows:
                return 0
            event_ids = list(dict.fromkeys(r.event_id for r in rows if r.replay_id is None))
            replay_ids = list(dict.fromkeys(r.replay_id for r in rows if r.replay_id is not None))
            batches = [Batch(event_ids=ids) for ids in chunk(event_ids, self.settings.job_size)]
            batches += [Batch(replay_ids=ids) for ids in chunk(replay_ids, self.settings.job_size)]
            self.sink.push(batches)
            self._mark_dispatched(session, batches)
            session.execute(delete(OutboxEntry).where(OutboxEntry.id.in_([r.id for r in rows])))
        self.sink.after_commit(batches)
        return len(rows)

    def _mark_dispatched(self, session: Session, batches: list[Batch]) -> None:
        now = self.runtime.clock()
        for batch in batches:
            for model, ids in ((Event, batch.event_ids), (Replay, batch.replay_ids)):
                if ids:
                    # A row a worker already holds is being processed: don't wait for it.
                    free = (
                        select(model.id).where(model.id.in_(ids)).with_for_update(skip_locked=True)
                    )
                    session.execute(
                        update(model)
                        .where(model.id.in_(free.scalar_subquery()))
                        .values(job_id=batch.job_id, dispatched_at=now)
                        .execution_options(synchronize_session=False)
                    )

    def sweep_once(self) -> int:
        """Put due retries, and work whose job is gone, back in the outbox.

        Work whose job is still queued or running is left alone, so a healthy
        backlog is never enqueued twice.
        """
        now = self.runtime.clock()
        due_events = [Event.status == PENDING, Event.next_attempt_at <= now]
        moved = self._sweep(Event, due_events, OutboxEntry.event_id == Event.id)
        moved += self._sweep(Replay, [Replay.status == PENDING], OutboxEntry.replay_id == Replay.id)
        return moved

    def _sweep(self, model: Any, due: list[ColumnElement[bool]], in_outbox: Any) -> int:
        cutoff = self.runtime.clock() - timedelta(seconds=self.settings.dispatch_grace_seconds)
        candidates = [
            *due,
            or_(model.dispatched_at.is_(None), model.dispatched_at <= cutoff),
            ~exists().where(in_outbox),
        ]
        with self.runtime.session_factory() as session:
            job_ids = session.scalars(
                select(model.job_id).where(*candidates).group_by(model.job_id).limit(500)
            ).all()
        if not job_ids:
            return 0
        alive = self.sink.in_flight([j for j in job_ids if j])
        lost = [j for j in job_ids if j and j not in alive]
        lost_condition = [model.job_id.in_(lost)] if lost else []
        if None in job_ids or "" in job_ids:
            lost_condition += [model.job_id.is_(None), model.job_id == ""]
        if not lost_condition:
            return 0
        with self.runtime.session_factory.begin() as session:
            ids = session.scalars(
                select(model.id)
                .where(*candidates, or_(*lost_condition))
                .order_by(model.id)
                .limit(self.settings.relay_batch_size)
                .with_for_update(skip_locked=True)
            ).all()
            if not ids:
                return 0
            now = self.runtime.clock()
            key = "event_id" if model is Event else "replay_id"
            rows = [{key: i, "created_at": now} for i in ids]
            if model is Replay:
                event_of = dict(
                    session.execute(
                        select(Replay.id, Replay.event_id).where(Replay.id.in_(ids))
                    ).all()
                )
                rows = [{**r, "event_id": event_of[r["replay_id"]]} for r in rows]
            session.execute(insert(OutboxEntry), rows)
            session.execute(
                update(model).where(model.id.in_(ids)).values(dispatched_at=now, job_id=None)
            )
        log.info("re-dispatched %d %s (due retries or lost jobs)", len(ids), model.__tablename__)
        return len(ids)

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
