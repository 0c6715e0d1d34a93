"""A chunk's run: the events one transaction claims and runs (``ChunkRun``), and the one
place they are claimed by their row locks (``claim``).

The job (``jobs``) hands a transaction a chunk of event ids; ``processing`` runs it with
a ``ChunkRun``, which ``keyed`` runs its keys' events with. Nothing here commits.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.events.models import IGNORED, PENDING, Event
from hooklatch.events.payloads import ClaimedRow, Payloads, claim_columns
from hooklatch.metrics import EventTally
from hooklatch.ordering.claims import KeyRef
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.attempts import ClaimedEvent, Writes, attempt


class Scheduled(Protocol):
    """An event's row, read with or without its lock: whether it runs now."""

    @property
    def id(self) -> int: ...
    @property
    def status(self) -> str: ...
    @property
    def next_attempt_at(self) -> datetime | None: ...


class EventState(Scheduled, Protocol):
    """An event of the chunk as ``claims.chunk_states`` reads it, with no lock."""

    @property
    def endpoint_id(self) -> str: ...
    @property
    def ordering_key(self) -> str | None: ...
    @property
    def payload_size(self) -> int: ...
    @property
    def ordering(self) -> str: ...
    @property
    def ordering_dead(self) -> str: ...


class Claimed(Scheduled, ClaimedRow, Protocol):
    """A claimed event's row (``claim``, or a key's ``claims.next_events``), its payload
    not read yet."""


def is_due(row: Scheduled, now: datetime) -> bool:
    """Pending, and its time has come."""
    return row.status == PENDING and row.next_attempt_at is not None and row.next_attempt_at <= now


def claim(session: Session, event_ids: list[int], now: datetime) -> dict[int, Claimed]:
    """Lock those of these events still pending and due, by primary key, in id order:
    another worker may have run one since its state was read, and a retry that waits is
    not locked. Rows already locked are someone else's right now. Their payloads are not
    read here, but as they run (``Payloads``). Only events that need no key's lock come
    here: unkeyed ones, and keyed ones whose endpoint does not order them; a key's events
    are claimed under its lock, in its order (``claims.next_events``)."""
    if not event_ids:
        return {}
    rows = session.execute(
        select(*claim_columns())
        .where(Event.id.in_(event_ids), Event.status == PENDING, Event.next_attempt_at <= now)
        .order_by(Event.id)
        .with_for_update(skip_locked=True)
    )
    return {row.id: row for row in rows if is_due(row, now)}


@dataclass
class Drain:
    """How many events a job may run beyond those it was given (``own``), from keys it
    holds: a key that never empties must not keep one job for ever. Every event run that
    is not the job's own counts, also one the job carried into its next transaction
    itself. Past it, the job hands the key's next event to the relay (``claims.wake``)."""

    remaining: int = 1000
    own: frozenset[int] = frozenset()
    # Keys the job's last transaction ran dry and let go at its commit: the job looks at
    # them again then (``keyed.look_again``), for events whose own jobs found the key held
    # meanwhile and left them to its holder.
    emptied: list[KeyRef] = field(default_factory=list)

    def allows(self, event_id: int) -> bool:
        """Whether the job may run this event: its own, or one within the budget."""
        return event_id in self.own or self.remaining > 0

    def spend(self, event_id: int) -> None:
        if event_id not in self.own:
            self.remaining -= 1


@dataclass
class ChunkRun:
    """One transaction's run of events: its session, when it starts no further event
    (``deadline``, on ``time.monotonic``, once it has run one), the job's drain budget, the
    payloads it reads as events run, the writes held back to its end, and the outcomes.
    Each outcome also goes to ``tally`` (metrics), which the caller records once the
    transaction has committed."""

    session: Session
    runtime: Runtime
    drain: Drain
    payloads: Payloads
    deadline: float
    writes: Writes = field(default_factory=Writes)
    outcomes: Counter[str] = field(default_factory=Counter)
    tally: EventTally = field(default_factory=EventTally)
    ran: int = 0  # events run so far

    def run(self, row: Claimed) -> str:
        """Run a claimed event's handlers once (its payload is read now, and dropped when
        this returns); returns its status after."""
        event: ClaimedEvent = self.payloads.take(row)
        started, began = self.runtime.clock(), time.monotonic()
        result = attempt(self.session, self.runtime, event)
        self.writes.add(event, result)
        # Due since it was stored (received_at), or since its retry, or its re-arming by a
        # duplicate delivery, made it due (next_attempt_at).
        due = max(event.received_at, event.next_attempt_at or event.received_at)
        self.tally.add(
            provider=event.provider,
            status=result.status,
            handler_seconds=None if result.status == IGNORED else time.monotonic() - began,
            first_attempt=event.attempts == 0,
            due=due,
            started=started,
        )
        self.outcomes[result.status] += 1
        self.ran += 1
        return result.status

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline
