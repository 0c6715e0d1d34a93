"""The job: run the events or replays a relay handed over, a transaction at a time.

``process_batch`` is the function the relay's jobs name (``hooklatch.jobs``, whose
``JOB_FUNCTION`` keeps its path for the jobs already queued); ``process_events`` and
``process_replays`` are the job's body, which the embedded dispatcher runs in the web
process too. They own the transactions; what runs inside them is in
``processing`` and ``replays``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence

from redis.exceptions import RedisError
from rq import Queue, get_current_job
from rq.job import Job
from sqlalchemy import ColumnElement, and_, update
from sqlalchemy.orm import configure_mappers

from hooklatch.events.activity import count_attempts
from hooklatch.events.models import OutboxEntry
from hooklatch.logs import bind
from hooklatch.metrics import REPLAYS, best_effort
from hooklatch.runtime import Runtime
from hooklatch.workers.lease import job_lease
from hooklatch.workers.worker.attempts import Activity
from hooklatch.workers.worker.chunk import Drain
from hooklatch.workers.worker.keyed import look_again
from hooklatch.workers.worker.processing import process_chunk, release_outbox_rows
from hooklatch.workers.worker.replays import process_replay, release_replay_rows

log = logging.getLogger(__name__)

# A worker claims up to this many events in one transaction (and starts no further event
# in it after processing.TRANSACTION_SECONDS). A commit and the claim are paid per chunk:
# with the row-writing handler, a backlog drained 7 to 10 % faster in chunks of 200 than
# of 100, and 9 to 11 % slower in chunks of 60 (docs/benchmarks.md).
EVENTS_PER_TRANSACTION = 200
# A job may run this many events of the keys it holds beyond those it was given (at
# least as many as it was given), then hands a busy key's next event back to the relay.
DRAIN_EVENTS = 1000


class _State:
    runtime: Runtime | None = None
    pid: int = 0
    # Set when the worker is asked to stop: the job ends after the chunk it is in and
    # hands the rest of its work back (see hand_back).
    stopping = threading.Event()


def stop_between_chunks() -> None:
    """Called from a signal handler: finish the chunk under way, start no other."""
    _State.stopping.set()


def install(runtime: Runtime) -> None:
    """Called once by the worker bootstrap; jobs find the runtime here.

    Mappers are configured here, before RQ forks a work horse per job: otherwise every
    work horse configures them again, which costs more than a small job's events.
    """
    configure_mappers()
    _State.runtime = runtime
    _State.pid = os.getpid()


def _runtime() -> Runtime:
    runtime = _State.runtime
    if runtime is None:
        raise RuntimeError("hooklatch jobs run in `hooklatch worker`, which sets up the runtime")
    if _State.pid != os.getpid():
        # A forked work horse must not use the parent's pooled connections.
        runtime.engine.dispose(close=False)
        _State.pid = os.getpid()
    return runtime


def process_batch(event_ids: list[int], replay_ids: list[int] | None = None) -> dict[str, int]:
    """The job: its arguments are a handoff's (``hooklatch.jobs.Handoff.arguments``)."""
    runtime = _runtime()
    job = get_current_job()
    job_id = job.id if job else None
    with bind(job_id=job_id), job_lease(runtime.engine, job_id):
        counts = process_events(runtime, event_ids, job_id=job_id)
        counts += process_replays(
            runtime, replay_ids or (), job_id=job_id, live_waiting=_live_waiting(runtime, job)
        )
    log.info("batch done: %s", dict(counts))
    return dict(counts)


def _live_waiting(runtime: Runtime, job: Job | None) -> Callable[[], bool] | None:
    """For a job taken from the replay queue: whether jobs wait on the live queue, which
    its worker takes next once this job ends. (Redis away: the replays go on.)"""
    if job is None or job.origin != runtime.settings.replay_queue_name:
        return None
    live = Queue(runtime.settings.queue_name, connection=job.connection)

    def waiting() -> bool:
        try:
            return live.count > 0
        except RedisError:
            return False

    return waiting


def process_events(
    runtime: Runtime, event_ids: Sequence[int], *, job_id: str | None = None
) -> Counter[str]:
    """Run the handlers of each pending, due event once, a chunk per transaction. With
    ``job_id``, the outbox rows handed to that job are deleted in the same transactions."""
    counts: Counter[str] = Counter()
    remaining = list(dict.fromkeys(event_ids))
    drain = Drain(remaining=max(len(remaining), DRAIN_EVENTS), own=frozenset(remaining))
    alone: list[int] = []  # events whose shared transaction could not commit
    while remaining or alone:
        if _State.stopping.is_set():
            carried = [i for i in remaining if i not in drain.own]
            _hand_back_events(runtime, job_id, [*alone, *remaining], carried=carried)
            break
        if alone:
            chunk, alone = alone[:1], alone[1:]
        else:
            chunk, remaining = (
                remaining[:EVENTS_PER_TRANSACTION],
                remaining[EVENTS_PER_TRANSACTION:],
            )
        try:
            left, outcomes = _transaction(runtime, chunk, job_id, drain)
        except Exception:
            if len(chunk) == 1:
                raise  # this event alone cannot commit: the job fails and is dispatched again
            # One event's writes broke the shared transaction: run these one per
            # transaction, so that only that one suffers.
            log.warning(
                "a transaction of %d events failed; running them one at a time",
                len(chunk),
                exc_info=True,
            )
            alone.extend(chunk)
            continue
        counts += outcomes
        remaining = left + remaining
        # Events of keys just let go, found after the commit: next, before the job's own.
        again = look_again(runtime, drain, stopping=_State.stopping.is_set())
        remaining = again + [i for i in remaining if i not in again]
    return counts


def _transaction(
    runtime: Runtime, chunk: list[int], job_id: str | None, drain: Drain
) -> tuple[list[int], Counter[str]]:
    """One chunk in one transaction: the ids claimed but left for later, and outcomes."""
    with runtime.session_factory.begin() as session:
        result = process_chunk(session, runtime, chunk, drain=drain)
        if job_id is not None and result.done:
            release_outbox_rows(session, result.done, job_id)
    # Committed: a chunk rolled back runs again and is counted then.
    result.tally.record()
    count_activity(runtime, result.activity)
    return result.left, result.outcomes


def count_activity(runtime: Runtime, seen: list[Activity]) -> None:
    """The console's hourly counts of a committed chunk, in a transaction of their own,
    so that workers never wait for each other on the counter rows while a chunk is
    open. Best effort: a failure to count is logged once and never fails the chunk."""
    if not seen:
        return
    with best_effort(), runtime.engine.begin() as connection:
        count_attempts(connection, seen, now=runtime.clock())


def process_replays(
    runtime: Runtime,
    replay_ids: Sequence[int],
    *,
    job_id: str | None = None,
    live_waiting: Callable[[], bool] | None = None,
) -> Counter[str]:
    """Each replay in its own transaction, with its outbox rows (handed to ``job_id``).

    Between two replays, when ``live_waiting`` says live jobs wait, the job hands the rest
    of its replays back to the relay and ends, so that its worker takes the live job next:
    a live event waits for one replay's handlers at most."""
    counts: Counter[str] = Counter()
    replay_ids = list(dict.fromkeys(replay_ids))
    for position, replay_id in enumerate(replay_ids):
        if _State.stopping.is_set():
            _hand_back_replays(runtime, job_id, replay_ids[position:])
            break
        if position and live_waiting is not None and live_waiting():
            rest = replay_ids[position:]
            _hand_back_replays(runtime, job_id, rest, why="live work waits")
            counts["replay_handed_back"] += len(rest)
            break
        with runtime.session_factory.begin() as session:
            replayed = process_replay(session, runtime, replay_id)
            if job_id is not None:
                release_replay_rows(session, replay_id, job_id)
        if replayed.held is not None:  # a key it held: its waiting events go to the relay
            look_again(runtime, Drain(remaining=0, emptied=[replayed.held]))
        outcome = replayed.outcome or "skipped"
        counts[f"replay_{outcome}"] += 1
        if outcome != "skipped":  # committed: counted once
            with best_effort():
                REPLAYS.labels(outcome).inc()
    return counts


def _hand_back_events(
    runtime: Runtime, job_id: str | None, event_ids: list[int], *, carried: list[int]
) -> None:
    """A stopping job's events it will not start: its rows for them go back to the relay.
    So do the rows of events of held keys it carried from other jobs (``carried``),
    whichever job had them: a job that still runs one finds it claimed."""
    live = OutboxEntry.replay_id.is_(None)
    if job_id is not None:
        mine = and_(OutboxEntry.job_id == job_id, live, OutboxEntry.event_id.in_(event_ids))
        _hand_back(runtime, mine)
    if carried:
        _hand_back(runtime, and_(live, OutboxEntry.event_id.in_(carried)))


def _hand_back_replays(
    runtime: Runtime, job_id: str | None, replay_ids: list[int], *, why: str = "stopping"
) -> None:
    """The job's rows for replays it will not start go back to the relay."""
    if job_id is not None:
        mine = and_(OutboxEntry.job_id == job_id, OutboxEntry.replay_id.in_(replay_ids))
        _hand_back(runtime, mine, why=why)


def _hand_back(runtime: Runtime, rows: ColumnElement[bool], *, why: str = "stopping") -> None:
    """Give these outbox rows back to the relay, which hands them out again at its next
    pass (not counted as a lost dispatch: nothing was started)."""
    with runtime.session_factory.begin() as session:
        handed = session.execute(
            update(OutboxEntry).where(rows).values(job_id=None, dispatched_at=None)
        ).rowcount
    log.info("%s: %d outbox rows handed back for another job", why, handed)
