"""Running the keyed events of a chunk: each key under its lock, in its order.

A chunk's unkeyed events are claimed by their row locks alone (``chunk.claim``); the rest
come here. For each key the transaction takes the key's lock or leaves the key's events
alone; with it, the key runs from its first pending event in (ordering_position, id)
order, whichever job brought each event, so a busy key moves at the speed of its handler:
the next event is claimed in the transaction that finished the one before
(``hooklatch.ordering.claims``; docs/architecture.md, "Ordering").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session

from hooklatch.endpoints.ordering import NONE, PARK
from hooklatch.events.models import DEAD, PENDING
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef, Policy
from hooklatch.runtime import Runtime
from hooklatch.workers.worker.chunk import ChunkRun, Claimed, Drain, EventState, claim

# A key's events read and locked at once: about what a transaction runs of a handler
# taking a few milliseconds. A transaction with time left reads the next ones.
EVENTS_PER_READ = 50

# Why a key's run stopped before its last pending event (none: it ran dry).
TIME = "time"  # the transaction has run long enough, or the job its share of others' events
WAITS = "waits"  # fifo: an event not due, failed and retried later, or dead and parking
PARKED = "parked"  # fifo: a dead event parks the key
SKIP = "skip"  # serial: an event not due is passed over (its retry comes from the sweep)


class KeyRow(Claimed, Protocol):
    """A key's next event as ``claims.next_events`` reads it."""

    @property
    def ordering_position(self) -> int: ...  # every keyed event has one (0 without a hold)
    @property
    def payload_size(self) -> int: ...
    @property
    def parked(self) -> bool: ...  # read under fifo only: whether a dead event parks the key


@dataclass(frozen=True)
class KeySettled:
    """What a key's run settled of the job's events of that key (``done``: their job's rows
    can go), which of them the job's next transaction runs (``again``), the events it ran
    from any job, and whether the key's next event goes back to the relay (``wake``)."""

    done: list[int]
    again: list[int] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)
    wake: bool = False


@dataclass
class KeyedResult:
    done: list[int] = field(default_factory=list)  # settled: their job's rows can go
    left: list[int] = field(default_factory=list)  # for the job's next transaction
    # The next event of each key stopped for time: left too, after the others.
    again: list[int] = field(default_factory=list)
    ran: list[int] = field(default_factory=list)  # run under their key's lock, from any job
    # Keys whose next event goes back to the relay once this transaction's writes are in.
    wake: list[KeyRef] = field(default_factory=list)

    def add(self, ref: KeyRef, settled: KeySettled) -> None:
        self.done += settled.done
        self.again += settled.again
        self.ran += settled.ran
        if settled.wake:
            self.wake.append(ref)


def run_keyed(run: ChunkRun, event_ids: list[int], states: Mapping[int, EventState]) -> KeyedResult:
    """Settle the chunk's events that the unkeyed claim did not take (``states``: each
    one's row from ``claims.chunk_states``). Each key's lock is taken just before the key
    runs, so that keys this transaction has no time for stay free for other workers. The
    payloads are told which events are to run, in their order, before each one runs."""
    candidates = [
        row
        for row in (states.get(i) for i in event_ids)
        if row is not None and row.status == PENDING and row.ordering_key is not None
    ]
    found = {row.id for row in candidates}
    # Whether the transaction ran events before this (the chunk's unkeyed ones): a key
    # is left for the next transaction once time is up only if something has run, those
    # or a key's events; keyed events whose endpoint no longer orders them do not count.
    ran_before = run.ran > 0
    result = KeyedResult(done=[i for i in event_ids if i not in found])  # processed, unkeyed
    unordered = [row.id for row in candidates if row.ordering == NONE]
    if unordered:  # keyed while its endpoint ordered events, no longer
        _run_unordered(run, unordered, states)
        result.done += unordered
    by_key: dict[KeyRef, list[int]] = defaultdict(list)
    policies: dict[KeyRef, Policy] = {}
    for row in candidates:
        if row.ordering != NONE and row.ordering_key is not None:
            ref = KeyRef(row.endpoint_id, row.ordering_key)
            by_key[ref].append(row.id)
            policies[ref] = claims.policy_of(row.ordering, row.ordering_dead)
    # Keys in the order the job has their events: a key stopped for time goes last in
    # the job's next transaction (``again``), so that one busy key does not starve others.
    place = {event_id: n for n, event_id in enumerate(event_ids)}
    order = sorted(by_key, key=lambda ref: min(place[i] for i in by_key[ref]))
    # Most keys run the events the job brought: their payloads are read together.
    run.payloads.expect(states[i] for ref in order for i in by_key[ref])
    for ref in order:
        given = by_key[ref]
        if (ran_before or result.ran) and run.out_of_time():
            # Not started: the job's next transaction tries the key again, and until then
            # the key is free for another worker.
            result.left += given
            continue
        if not claims.try_key_locks(run.session, [ref]):
            continue  # held elsewhere: its holder runs these, so their rows stay as they are
        result.add(ref, _run_key(run, ref, policies[ref], given))
    claims.forget_rows(run.session, result.ran)
    result.left += result.again
    return result


def _run_unordered(run: ChunkRun, event_ids: list[int], states: Mapping[int, EventState]) -> None:
    claimed = claim(run.session, event_ids, run.runtime.clock())
    run.payloads.expect(states[i] for i in claimed)
    for row in claimed.values():
        run.run(row)


def _run_key(run: ChunkRun, ref: KeyRef, policy: Policy, given: list[int]) -> KeySettled:
    """Run the key's events in order while they are due. Under fifo the first one that is
    not due (a retry waiting, a hold window) or that dies under ``park`` stops the key:
    the rest wait, without outbox rows, for the key's next run. Under serial a key only
    stops for time."""
    now = run.runtime.clock()
    ran, stop = _run_in_order(run, ref, policy, now)
    if not stop:
        run.drain.emptied.append(ref)
    if stop != TIME:
        return KeySettled(done=given, ran=ran)  # the key waits (fifo), or ran them
    if run.drain.remaining <= 0:
        # This job has run its share: the relay hands the key's next event out again.
        return KeySettled(done=given, ran=ran, wake=True)
    # The job goes on with this key in its next transaction.
    again = [i for i in given if i not in ran] or _next_id(run.session, ref, set(ran), now)
    return KeySettled(done=[i for i in given if i not in again], again=again, ran=ran)


def _run_in_order(
    run: ChunkRun, ref: KeyRef, policy: Policy, now: datetime
) -> tuple[list[int], str]:
    """The key's events run, reading them a few at a time, and why the run stopped."""
    ran: list[int] = []
    after: tuple[int, int] | None = None
    while True:
        rows: Sequence[KeyRow] = claims.next_events(
            run.session, ref, limit=EVENTS_PER_READ, after=after, fifo=policy.fifo
        )
        if policy.fifo and rows and rows[0].parked:
            return ran, PARKED  # the job's events wait for the key's release, rowless
        run.payloads.expect(rows)
        for row in rows:
            stop = _stop_before(run, row, policy, now, ran_some=bool(ran))
            if stop == SKIP:
                continue
            if stop:
                return ran, stop
            run.drain.spend(row.id)
            status = run.run(row)
            ran.append(row.id)
            if policy.fifo and status == DEAD and policy.dead == PARK:
                claims.park(run.session, ref, row.id, now=run.runtime.clock())
                return ran, WAITS
            if policy.fifo and status == PENDING:  # failed, retried later: the key waits
                return ran, WAITS
        if len(rows) < EVENTS_PER_READ:
            return ran, ""
        after = (rows[-1].ordering_position, rows[-1].id)


def _stop_before(
    run: ChunkRun, row: KeyRow, policy: Policy, now: datetime, *, ran_some: bool
) -> str:
    """Whether the key stops before this event: WAITS (fifo, not due), SKIP (serial, not
    due), TIME (the transaction has run long enough, or the job its share of events it
    was not given), or ""."""
    if row.next_attempt_at is not None and row.next_attempt_at > now:
        return WAITS if policy.fifo else SKIP
    if ran_some and (run.out_of_time() or not run.drain.allows(row.id)):
        return TIME
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
