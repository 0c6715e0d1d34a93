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

from hooklatch.endpoints.ordering import NONE, PARK
from hooklatch.events.models import DEAD, PENDING, Event
from hooklatch.events.payloads import Payloads, claim_columns, payload_size
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef, Policy
from hooklatch.runtime import Runtime

# A key's events read and locked at once: about what a transaction runs of a handler
# taking a few milliseconds. A transaction with time left reads the next ones.
EVENTS_PER_READ = 50


@dataclass
class Drain:
    """How many events a job may run beyond those it was given (``own``), from keys it
    holds: a key that never empties must not keep one job for ever. Every event run that
    is not the job's own counts, also one the job carried into its next transaction
    itself. Past it, the job hands the key's next event to the relay (``claims.wake``)."""

    remaining: int = 1000
    own: frozenset[int] = frozenset()
    # Keys the job's last transaction ran dry and let go at its commit: the job looks at
    # them again then (``look_again``), for events whose own jobs found the key held
    # meanwhile and left them to its holder.
    emptied: list[KeyRef] = field(default_factory=list)


@dataclass
class KeyedResult:
    done: list[int] = field(default_factory=list)  # settled: their job's rows can go
    left: list[int] = field(default_factory=list)  # for the job's next transaction
    # The next event of each key stopped for time: left too, after the others.
    again: list[int] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)  # run here, from any job
    # Keys whose next event goes back to the relay once this transaction's writes are in.
    wake: list[KeyRef] = field(default_factory=list)


Step = Callable[[Any], str]  # runs one claimed event, returns its status after


def run_keyed(
    session: Session,
    runtime: Runtime,
    event_ids: list[int],
    states: dict[int, Any],
    step: Step,
    payloads: Payloads,
    *,
    deadline: float,
    drain: Drain,
    ran_before: bool = False,
) -> KeyedResult:
    """Settle the chunk's events that the unkeyed claim did not take (``states``: each
    one's row from ``claims.chunk_states``). Each key's lock is taken just before the key
    runs, so that keys this transaction has no time for stay free for other workers;
    ``ran_before`` says the transaction has run events already. ``payloads`` is told
    which events are to run, in their order, before ``step`` takes each one's payload."""
    result = KeyedResult()
    candidates = [
        row
        for row in (states.get(i) for i in event_ids)
        if row is not None and row.status == PENDING and row.ordering_key is not None
    ]
    found = {row.id for row in candidates}
    result.done += [i for i in event_ids if i not in found]  # processed, not ours, unkeyed
    unordered = [row.id for row in candidates if row.ordering == NONE]
    if unordered:  # keyed while its endpoint ordered events, no longer
        _run_unordered(session, runtime, unordered, step, payloads, result)
    by_key: dict[KeyRef, list[int]] = defaultdict(list)
    policies: dict[KeyRef, Policy] = {}
    for row in candidates:
        if row.ordering != NONE:
            ref = KeyRef(row.endpoint_id, row.ordering_key)
            by_key[ref].append(row.id)
            policies[ref] = claims.policy_of(row.ordering, row.ordering_dead)
    # Keys in the order the job has their events: a key stopped for time goes last in
    # the job's next transaction (``again``), so that one busy key does not starve others.
    place = {event_id: n for n, event_id in enumerate(event_ids)}
    order = sorted(by_key, key=lambda ref: min(place[i] for i in by_key[ref]))
    # Most keys run the events the job brought: their payloads are read together.
    payloads.expect(states[i] for ref in order for i in by_key[ref])
    for ref in order:
        given = by_key[ref]
        if (ran_before or result.ran) and time.monotonic() > deadline:
            # Not started: the job's next transaction tries the key again, and until then
            # the key is free for another worker.
            result.left += given
            continue
        if not claims.try_key_locks(session, [ref]):
            continue  # held elsewhere: its holder runs these, so their rows stay as they are
        _run_key(
            session,
            runtime,
            ref,
            policies[ref],
            given,
            step,
            payloads,
            result,
            deadline=deadline,
            drain=drain,
        )
    claims.forget_rows(session, result.ran)
    result.left += result.again
    return result


def _run_unordered(
    session: Session,
    runtime: Runtime,
    ids: list[int],
    step: Step,
    payloads: Payloads,
    result: KeyedResult,
) -> None:
    claimed = session.execute(
        select(*claim_columns(), payload_size())
        .where(Event.id.in_(ids), Event.status == PENDING, Event.next_attempt_at <= runtime.clock())
        .order_by(Event.id)
        .with_for_update(skip_locked=True)
    ).all()
    payloads.expect(claimed)
    for row in claimed:
        step(row)
    result.done += ids


def _run_key(
    session: Session,
    runtime: Runtime,
    ref: KeyRef,
    policy: Policy,
    given: list[int],
    step: Step,
    payloads: Payloads,
    result: KeyedResult,
    *,
    deadline: float,
    drain: Drain,
) -> None:
    """Run the key's events in order while they are due, reading them a few at a time.
    Under fifo the first one that is not due (a retry waiting, a hold window) or that dies
    under ``park`` stops the key: the rest wait, without outbox rows, for the key's next
    run. Under serial a key only stops for time."""
    ran: set[int] = set()
    now = runtime.clock()
    after: tuple[int, int] | None = None
    stop = ""  # why the key stopped: "time", "waits", or "" for none left (see _stop_before)
    while not stop:
        rows = claims.next_events(
            session, ref, limit=EVENTS_PER_READ, after=after, fifo=policy.fifo
        )
        if policy.fifo and rows and rows[0].parked:
            result.done += given  # they wait for the key's release, rowless
            return
        payloads.expect(rows)
        for row in rows:
            stop = _stop_before(row, policy, now, bool(ran), deadline, drain)
            if stop == "skip":
                stop = ""
                continue
            if stop:
                break
            if row.id not in drain.own:
                drain.remaining -= 1
            status = step(row)
            ran.add(row.id)
            result.ran.append(row.id)
            if policy.fifo and status == DEAD and policy.dead == PARK:
                claims.park(session, ref, row.id, now=runtime.clock())
                stop = "waits"
            elif policy.fifo and status == PENDING:  # failed, retried later: the key waits
                stop = "waits"
            if stop:
                break
        if len(rows) < EVENTS_PER_READ:
            break
        after = (rows[-1].ordering_position, rows[-1].id)
    if not stop:
        drain.emptied.append(ref)
    if stop != "time":
        result.done += given  # the key waits (fifo), or ran them (or they are not due)
        return
    unrun = [i for i in given if i not in ran]
    if drain.remaining > 0:
        # The job goes on with this key in its next transaction.
        result.again += unrun or _next_id(session, ref, ran, now)
    else:
        # This job has run its share: the relay hands the key's next event out again.
        result.wake.append(ref)
    result.done += [i for i in given if i not in result.again]


def _stop_before(
    row: Any, policy: Policy, now: datetime, ran_some: bool, deadline: float, drain: Drain
) -> str:
    """Whether the key stops before this event: "waits" (fifo, not due), "skip" (serial,
    not due: its retry comes from the sweep), "time" (the transaction has run long
    enough, or the job its share of events it was not given), or ""."""
    if row.next_attempt_at is not None and row.next_attempt_at > now:
        return "waits" if policy.fifo else "skip"
    beyond = row.id not in drain.own and drain.remaining <= 0
    if ran_some and (time.monotonic() > deadline or beyond):
        return "time"
    return ""


def look_again(runtime: Runtime, drain: Drain, *, stopping: bool = False) -> list[int]:
    """After a commit: an event of each key the transaction ran dry and let go, if one is
    pending and due now, for the job to go on with (or, once the job has run its share,
    handed back to the relay). Such an event came in while the key was held: its own job
    found the key locked and left it to the holder, which had already read the key's
    last events. Every job that finds a key held leaves its events to a holder that looks
    again after letting it go, so none waits for the relay's sweep. A job whose worker is
    stopping hands them to the relay too."""
    refs, drain.emptied = drain.emptied, []
    if not refs:
        return []
    with runtime.session_factory.begin() as session:
        found = claims.pending_keys(session, refs, due_by=runtime.clock())
        if drain.remaining > 0 and not stopping:
            return list(found.values())
        for ref in found:
            claims.wake(session, ref, now=runtime.clock())
    return []


def _next_id(session: Session, ref: KeyRef, ran: set[int], now: datetime) -> list[int]:
    """The key's next due event past those this transaction ran (their new states are
    written at its end)."""
    found = claims.first_pending(session, ref, due_by=now, past=ran)
    return [] if found is None else [found]
