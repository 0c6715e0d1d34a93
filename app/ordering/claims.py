"""Claiming keyed events: a key's lock, its parked state, its next events in order.

Under ``serial`` and ``fifo`` an event with a key is claimed only by a transaction that
holds its key's lock: a PostgreSQL transaction-level advisory lock on a hash of
(endpoint, key), taken with ``pg_try_advisory_xact_lock`` before any of the key's rows
is locked. It is released at commit or rollback, and with the connection of a process
that dies: like an event's row lock, "this key is being worked on" is a held lock, never
a stored state that can go stale. On other databases every transaction takes the write
lock at BEGIN (SQLite), so a key is always free to the one transaction that runs.

Nothing here commits; the worker's transaction holds what it takes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    CursorResult,
    Integer,
    Row,
    Select,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    or_,
    select,
    text,
    tuple_,
    update,
)
from sqlalchemy.orm import Session

from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import FIFO, NONE
from hooklatch.events.models import DEAD, PENDING, Event, OutboxEntry
from hooklatch.events.payloads import claim_columns, payload_size
from hooklatch.ordering.models import OrderingKey


@dataclass(frozen=True)
class KeyRef:
    endpoint_id: str
    key: str


@dataclass(frozen=True)
class Policy:
    """An endpoint's ordering as the worker applies it."""

    ordering: str
    dead: str

    @property
    def fifo(self) -> bool:
        return self.ordering == FIFO


def lock_ids(ref: KeyRef) -> tuple[int, int]:
    """Two 32-bit halves of a 64-bit hash: PostgreSQL's two-key advisory locks, a space
    apart from the one-key locks that jobs' leases take. Two keys that collide are only
    serialised together, never run at once."""
    digest = hashlib.blake2b(f"{ref.endpoint_id}\x00{ref.key}".encode(), digest_size=8).digest()
    return (
        int.from_bytes(digest[:4], "big", signed=True),
        int.from_bytes(digest[4:], "big", signed=True),
    )


def try_key_locks(session: Session, refs: Sequence[KeyRef]) -> set[KeyRef]:
    """The keys of these whose lock this transaction now holds (held until it ends)."""
    if not refs:
        return set()
    if session.get_bind().dialect.name != "postgresql":
        return set(refs)
    params: dict[str, int] = {}
    calls = []
    for number, ref in enumerate(refs):
        params[f"a{number}"], params[f"b{number}"] = lock_ids(ref)
        calls.append(f"pg_try_advisory_xact_lock(:a{number}, :b{number})")
    got = session.execute(text("SELECT " + ", ".join(calls)), params).one()
    return {ref for ref, held in zip(refs, got, strict=True) if held}


def wait_key_lock(session: Session, ref: KeyRef) -> None:
    """Wait for a key's lock (a replay, which must not overlap the key's other events)."""
    if session.get_bind().dialect.name == "postgresql":
        a, b = lock_ids(ref)
        session.execute(text("SELECT pg_advisory_xact_lock(:a, :b)"), {"a": a, "b": b})


def chunk_states(session: Session, event_ids: Iterable[int]) -> dict[int, Row[Any]]:
    """Each of these events' state, key, payload size and endpoint's ordering, by id. No
    lock. Found by primary key alone, the rest checked by the caller: given a status to
    match, a planner without statistics (a backlog that grew faster than autovacuum
    analyses it) walks every pending event through the (status, next_attempt_at) index
    instead."""
    rows: Iterable[Row[Any]] = session.execute(
        select(
            Event.id,
            Event.endpoint_id,
            Event.ordering_key,
            Event.status,
            Event.next_attempt_at,
            payload_size(),
            Endpoint.ordering,
            Endpoint.ordering_dead,
        )
        .join(Endpoint, Endpoint.id == Event.endpoint_id)
        .where(Event.id.in_(list(event_ids)))
    )
    return {row.id: row for row in rows}


def next_events(
    session: Session,
    ref: KeyRef,
    *,
    limit: int,
    after: tuple[int, int] | None = None,
    fifo: bool = False,
) -> list[Row[Any]]:
    """The key's next ``limit`` pending events, locked, in the order it runs them
    (ordering_position, id), from past ``after`` (the position and id of the last one
    read before, in this transaction), without their payloads (``claim_columns``): those
    are read as the events run. One range of ``ix_events_ordering`` read in order and
    cut at ``limit``, whatever the table's statistics say. The caller holds the key's
    lock, so nobody else claims its rows: the wait for a row lock is one for a statement
    in flight (a provider's retry re-arming a dead event), never for a handler.

    With ``fifo`` each row also says whether a dead event parks the key (``parked``), read
    in the same statement, after the key's lock was taken: a holder that parked it has
    committed by then."""
    params: dict[str, Any] = {"endpoint_id": ref.endpoint_id, "key": ref.key, "limit": limit}
    if after is not None:
        params["position"], params["after_id"] = after
    return list(session.execute(_next_events_query(after is not None, fifo), params))


@cache
def _next_events_query(after: bool, fifo: bool) -> Select[Any]:
    """Built once per shape, with bound parameters: building a statement costs more than
    running this one."""
    query = (
        select(*claim_columns(), payload_size())
        .where(
            Event.endpoint_id == bindparam("endpoint_id"),
            Event.ordering_key == bindparam("key"),
            Event.status == PENDING,
        )
        .order_by(Event.ordering_position, Event.id)
        .limit(bindparam("limit", type_=Integer))
        .with_for_update(of=Event.__table__)
    )
    if after:
        position = bindparam("position", type_=BigInteger)
        query = query.where(
            tuple_(Event.ordering_position, Event.id)
            > tuple_(position, bindparam("after_id", type_=BigInteger))
        )
    if fifo:
        dead = Event.__table__.alias("dead")
        parked = exists(
            select(OrderingKey.key)
            .join(dead, dead.c.id == OrderingKey.parked_event_id)
            .where(
                OrderingKey.endpoint_id == bindparam("endpoint_id"),
                OrderingKey.key == bindparam("key"),
                dead.c.status == DEAD,
            )
        )
        query = query.add_columns(parked.label("parked"))
    return query


def pending_keys(
    session: Session, refs: Sequence[KeyRef], *, due_by: datetime
) -> dict[KeyRef, int]:
    """An event of each of these keys that is pending and due, for those that have one."""
    if not refs:
        return {}
    rows = session.execute(
        select(Event.endpoint_id, Event.ordering_key, func.min(Event.id))
        .where(
            tuple_(Event.endpoint_id, Event.ordering_key).in_(
                [(ref.endpoint_id, ref.key) for ref in refs]
            ),
            Event.ordering_key.is_not(None),  # the partial index's predicate
            Event.status == PENDING,
            Event.next_attempt_at <= due_by,
        )
        .group_by(Event.endpoint_id, Event.ordering_key)
    )
    return {KeyRef(endpoint_id, str(key)): event_id for endpoint_id, key, event_id in rows}


def park(session: Session, ref: KeyRef, event_id: int, *, now: datetime) -> None:
    """A dead event holds its key until it succeeds on a replay, a provider's retry
    re-arms it, or someone releases the key."""
    _upsert(session, ref, {"parked_event_id": event_id, "parked_at": now, "updated_at": now})


def release(session: Session, ref: KeyRef, *, now: datetime) -> int | None:
    """Unpark a key and hand its next event out, under the key's lock (a worker holding it
    may be settling the key's events as parked). The dead event it was parked on, or None
    if it was not parked."""
    wait_key_lock(session, ref)
    where = (OrderingKey.endpoint_id == ref.endpoint_id, OrderingKey.key == ref.key)
    parked = session.scalar(select(OrderingKey.parked_event_id).where(*where).with_for_update())
    if parked is None:
        return None
    session.execute(
        update(OrderingKey)
        .where(*where)
        .values(parked_event_id=None, parked_at=None, updated_at=now)
    )
    wake(session, ref, now=now)
    return parked


def first_pending(
    session: Session, ref: KeyRef, *, due_by: datetime | None = None, past: Iterable[int] = ()
) -> int | None:
    """The key's first pending event in its order (due by then, and not one of ``past``)."""
    query = (
        select(Event.id)
        .where(
            Event.endpoint_id == ref.endpoint_id,
            Event.ordering_key == ref.key,
            Event.status == PENDING,
        )
        .order_by(Event.ordering_position, Event.id)
        .limit(1)
    )
    if due_by is not None:
        query = query.where(Event.next_attempt_at <= due_by)
    if past:
        query = query.where(Event.id.not_in(list(past)))
    return session.scalar(query)


def wake(session: Session, ref: KeyRef, *, now: datetime) -> int | None:
    """Hand the key's next pending event to the relay (a new outbox row, or its row
    handed out again): whoever claims it goes on through the key. Its id, or None."""
    head = first_pending(session, ref)
    if head is None:
        return None
    moved = cast(
        CursorResult[Any],
        session.execute(
            update(OutboxEntry)
            .where(OutboxEntry.event_id == head, OutboxEntry.replay_id.is_(None))
            .values(job_id=None, dispatched_at=None)
        ),
    ).rowcount
    if not moved:
        session.execute(insert(OutboxEntry).values(event_id=head, created_at=now))
    return head


def forget_rows(session: Session, event_ids: Sequence[int]) -> None:
    """Delete every outbox row of events that ran, whichever job they were handed to:
    a key's holder runs events that arrived in other jobs."""
    if event_ids:
        session.execute(
            delete(OutboxEntry).where(
                OutboxEntry.event_id.in_(event_ids), OutboxEntry.replay_id.is_(None)
            )
        )


def _upsert(session: Session, ref: KeyRef, values: dict[str, Any]) -> None:
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as upsert
    else:
        from sqlalchemy.dialects.sqlite import insert as upsert  # type: ignore[assignment]
    statement = upsert(OrderingKey).values(endpoint_id=ref.endpoint_id, key=ref.key, **values)
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[OrderingKey.endpoint_id, OrderingKey.key], set_=values
        )
    )


def may_be_queued() -> ColumnElement[bool]:
    """For the relay's sweep, which gives pending, due events without an outbox row one:
    under fifo only a key's first pending event, and none of a parked key. The others
    wait for the key's holder, who runs them after it (or hands the next one out)."""
    head = Event.__table__.alias("head")
    dead = Event.__table__.alias("dead")
    fifo = exists(
        select(Endpoint.id).where(Endpoint.id == Event.endpoint_id, Endpoint.ordering == FIFO)
    )
    first = (
        select(head.c.id)
        .where(
            head.c.endpoint_id == Event.endpoint_id,
            head.c.ordering_key == Event.ordering_key,
            head.c.status == PENDING,
        )
        .order_by(head.c.ordering_position, head.c.id)
        .limit(1)
        .scalar_subquery()
    )
    parked = exists(
        select(OrderingKey.key)
        .join(dead, dead.c.id == OrderingKey.parked_event_id)
        .where(
            OrderingKey.endpoint_id == Event.endpoint_id,
            OrderingKey.key == Event.ordering_key,
            dead.c.status == DEAD,
        )
    )
    return or_(Event.ordering_key.is_(None), ~fifo, and_(Event.id == first, ~parked))


def fifo_key(session: Session, event_id: int) -> tuple[KeyRef, str] | None:
    """The event's key and what a dead event does to it, if its endpoint is fifo."""
    row = session.execute(
        select(Event.endpoint_id, Event.ordering_key, Endpoint.ordering_dead)
        .join(Endpoint, Endpoint.id == Event.endpoint_id)
        .where(Event.id == event_id, Event.ordering_key.is_not(None), Endpoint.ordering == FIFO)
    ).first()
    return None if row is None else (KeyRef(row.endpoint_id, row.ordering_key), row.ordering_dead)


def policy_of(ordering: str | None, dead: str | None) -> Policy:
    return Policy(ordering or NONE, dead or "park")
