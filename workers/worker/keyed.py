"""Running the keyed events of a chunk: each key under its lock, in its order.

A chunk's unkeyed events are claimed by their row locks alone (``processing``); the rest
come here. For each key the transaction takes the key's lock or leaves the key's events
alone; with it, the key runs from its first pending event in (ordering_position, id)
order, whichever job brought each event, so a busy key moves at the speed of its handler:
the next event is claimed in the transaction that finished the one before
(``hooklatch.ordering.claims``; docs/architecture.md, "Ordering").
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.events.models import DEAD, PENDING, Event
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef, Policy
from hooklatch.ordering.models import NONE, PARK
from hooklatch.runtime import Runtime

# A key's events read and locked at once, per transaction.
EVENTS_PER_KEY = 200


@dataclass
class Drain:
    """How many events a job may run beyond those it was given, from keys it holds: a key
    that never empties must not keep one job for ever. Past it, the job hands the key's
    next event to the relay (``claims.wake``)."""

    remaining: int = 1000


@dataclass
class KeyedResult:
    done: list[int] = field(default_factory=list)  # settled: their job's rows can go
    left: list[int] = field(default_factory=list)  # for the job's next transaction
    ran: list[int] = field(default_factory=list)  # run here, from any job
    # Keys whose next event goes back to the relay once this transaction's writes are in.
    wake: list[KeyRef] = field(default_factory=list)


Step = Callable[[Any], str]  # runs one claimed event, returns its status after


def run_keyed(
    session: Session,
    runtime: Runtime,
    event_ids: list[int],
    step: Step,
    *,
    deadline: float,
    drain: Drain,
) -> KeyedResult:
    """Settle the chunk's events that the unkeyed claim did not take."""
    result = KeyedResult()
    candidates = claims.keyed_candidates(session, event_ids)
    found = {row.id for row in candidates}
    result.done += [i for i in event_ids if i not in found]  # processed, not ours, unkeyed
    unordered = [row.id for row in candidates if row.ordering == NONE]
    if unordered:  # keyed while its endpoint ordered events, no longer
        _run_unordered(session, runtime, unordered, step, result)
    by_key: dict[KeyRef, list[int]] = defaultdict(list)
    policies: dict[KeyRef, Policy] = {}
    for row in candidates:
        if row.ordering != NONE:
            ref = KeyRef(row.endpoint_id, row.ordering_key)
            by_key[ref].append(row.id)
            policies[ref] = claims.policy_of(row.ordering, row.ordering_dead)
    refs = sorted(by_key)
    held = claims.try_key_locks(session, refs)
    # A key held elsewhere: its holder runs these, so their rows are left as they are.
    parked = claims.parked_keys(session, [r for r in refs if r in held and policies[r].fifo])
    for ref in refs:
        if ref in parked:
            result.done += by_key[ref]  # they wait for the key's release, rowless
    running = [r for r in refs if r in held and r not in parked]
    rows: dict[KeyRef, list[Any]] = defaultdict(list)
    for row in claims.next_events(session, running, limit=EVENTS_PER_KEY):
        rows[KeyRef(row.endpoint_id, row.ordering_key)].append(row)
    for ref in running:
        _run_key(
            session,
            runtime,
            ref,
            policies[ref],
            (rows[ref], by_key[ref]),
            step,
            result,
            deadline=deadline,
            drain=drain,
        )
    claims.forget_rows(session, result.ran)
    return result


def _run_unordered(
    session: Session, runtime: Runtime, ids: list[int], step: Step, result: KeyedResult
) -> None:
    claimed = session.execute(
        select(Event.__table__)
        .where(Event.id.in_(ids), Event.status == PENDING, Event.next_attempt_at <= runtime.clock())
        .order_by(Event.id)
        .with_for_update(skip_locked=True)
    ).all()
    for row in claimed:
        step(row)
    result.done += ids


def _run_key(
    session: Session,
    runtime: Runtime,
    ref: KeyRef,
    policy: Policy,
    work: tuple[list[Any], list[int]],
    step: Step,
    result: KeyedResult,
    *,
    deadline: float,
    drain: Drain,
) -> None:
    """Run the key's events in order while they are due. Under fifo the first one that is
    not due (a retry waiting, a hold window) or that dies under ``park`` stops the key:
    the rest wait, without outbox rows, for the key's next run. Under serial a key only
    stops for time."""
    rows, given = work
    given_set = set(given)
    ran: set[int] = set()
    now = runtime.clock()
    stopped_for_time = False
    for row in rows:
        if row.next_attempt_at > now:
            if policy.fifo:
                break
            continue  # serial: its retry comes from the sweep when due
        beyond = row.id not in given_set and drain.remaining <= 0
        if ran and (time.monotonic() > deadline or beyond):
            stopped_for_time = True
            break
        if row.id not in given_set:
            drain.remaining -= 1
        status = step(row)
        ran.add(row.id)
        result.ran.append(row.id)
        if policy.fifo and status == DEAD and policy.dead == PARK:
            claims.park(session, ref, row.id, now=runtime.clock())
            break
        if policy.fifo and status == PENDING:  # failed, retried later: the key waits
            break
    else:
        # Every row read ran or was not due: more may follow past those read.
        stopped_for_time = len(rows) >= EVENTS_PER_KEY and rows[-1].id in ran
    unrun = [i for i in given if i not in ran]
    if not stopped_for_time:
        result.done += given  # the key waits (fifo), or these are not due (serial)
        return
    if drain.remaining > 0:
        # The job goes on with this key in its next transaction.
        result.left += unrun or _next_id(session, ref, ran, now)
    else:
        # This job has run its share: the relay hands the key's next event out again.
        result.wake.append(ref)
    result.done += [i for i in given if i not in result.left]


def _next_id(session: Session, ref: KeyRef, ran: set[int], now: datetime) -> list[int]:
    """The key's next due event past those this transaction ran (their new states are
    written at its end)."""
    found = claims.first_pending(session, ref, due_by=now, past=ran)
    return [] if found is None else [found]
