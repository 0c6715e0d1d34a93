"""Running a chunk of events, in the caller's transaction.

Each unkeyed event is claimed by its row lock (``chunk.claim``), each keyed one under its
key's lock (``keyed``), and its handlers run in a savepoint (``attempts``), so one failure
undoes only that event's writes. Nothing here commits: the job
(``hooklatch.workers.worker.jobs``) owns the transaction.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, or_
from sqlalchemy.orm import Session

from hooklatch.events.models import OutboxEntry
from hooklatch.events.payloads import Payloads
from hooklatch.metrics import EventTally
from hooklatch.ordering import claims
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.attempts import Activity
from hooklatch.workers.worker.chunk import ChunkRun, Drain, EventState, claim, is_due
from hooklatch.workers.worker.keyed import KeyedResult, run_keyed

# A chunk starts no further event once it has run this long: the per-event cost of a
# transaction (claim, commit, outbox delete) is shared, while locks stay short and effects
# become visible soon. (A slow handler still holds its chunk's earlier events until it
# returns.)
TRANSACTION_SECONDS = 0.25


@dataclass(frozen=True)
class ChunkResult:
    """What a chunk's run dealt with (``done``: run, or settled elsewhere), what it left
    for the next transaction, and its outcomes; ``tally`` (metrics) and ``activity`` (the
    console's hourly counts) are the caller's to record once the transaction committed."""

    done: list[int]
    left: list[int]
    outcomes: Counter[str]
    tally: EventTally
    activity: list[Activity]


def process_chunk(
    session: Session, runtime: Runtime, event_ids: list[int], *, drain: Drain | None = None
) -> ChunkResult:
    """Run the handlers of each of these events that is pending and due, once.

    Dealt with: run, or settled elsewhere (processed already, not due, held by another
    worker right now, or waiting behind their key). Left for the next transaction: those
    this one has no time for. Unkeyed events run first, in the chunk's order; then keyed
    ones (``keyed``), which may run more of the key's events than the job brought, within
    ``drain``.
    """
    now = runtime.clock()
    states: Mapping[int, EventState] = claims.chunk_states(session, event_ids)
    claimed = claim(session, [i for i in event_ids if _unkeyed_due(states.get(i), now)], now)
    payloads = Payloads(session, runtime.settings.worker_body_bytes)
    payloads.expect(states[i] for i in event_ids if i in claimed)
    deadline = time.monotonic() + TRANSACTION_SECONDS
    run = ChunkRun(session, runtime, drain or Drain(), payloads, deadline)
    done: list[int] = []
    left: list[int] = []
    unclaimed: list[int] = []
    for position, event_id in enumerate(event_ids):
        if done and run.out_of_time():
            left = event_ids[position:]
            break
        row = claimed.get(event_id)
        if row is None:
            unclaimed.append(event_id)
            continue
        run.run(row)
        done.append(event_id)
    keyed = run_keyed(run, unclaimed, states) if unclaimed else KeyedResult()
    run.outcomes["skipped"] += len(set(keyed.done) - set(keyed.ran))
    activity = run.writes.apply(session, runtime.clock())
    for ref in keyed.wake:
        claims.wake(session, ref, now=runtime.clock())
    return ChunkResult(done + keyed.done, left + keyed.left, run.outcomes, run.tally, activity)


def _unkeyed_due(state: EventState | None, now: datetime) -> bool:
    return state is not None and state.ordering_key is None and is_due(state, now)


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
