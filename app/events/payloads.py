"""An event's payload (its body and headers), read apart from the rest of its row.

A worker claims a chunk of events by their other columns (``claim_columns``), knowing
each payload's size (``payload_size``); the payloads are read as the events run, a group
at a time, the group's sizes together within a budget (``Payloads``), so that what a
work horse holds does not grow with its chunk's bodies. Nothing here commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from types import SimpleNamespace
from typing import Any, NamedTuple, Protocol

from sqlalchemy import ColumnElement, RowMapping, Text, cast, func, select
from sqlalchemy.orm import Session

from hooklatch.events.models import Event

# The columns read only with the payload.
PAYLOAD_COLUMNS = ("body", "headers")


class Payload(NamedTuple):
    body: bytes | None
    headers: dict[str, Any] | None


NO_PAYLOAD = Payload(None, None)


@cache
def claim_columns() -> tuple[ColumnElement[Any], ...]:
    """Every column of ``events`` but the body and headers."""
    return tuple(column for column in Event.__table__.c if column.name not in PAYLOAD_COLUMNS)


def payload_size() -> ColumnElement[int]:
    """The body's bytes and the headers' JSON text, as stored: read from the values'
    headers (PostgreSQL's length of a bytea never decompresses or fetches it) and the
    headers' short text, never from the body itself."""
    body = func.coalesce(func.length(Event.body), 0)
    headers = func.coalesce(func.length(cast(Event.headers, Text)), 0)
    return (body + headers).label("payload_size")


def read_payloads(session: Session, event_ids: Iterable[int]) -> dict[int, Payload]:
    """These events' payloads, by id, in one statement."""
    rows = session.execute(
        select(Event.id, Event.body, Event.headers).where(Event.id.in_(list(event_ids)))
    )
    return {row.id: Payload(row.body, row.headers) for row in rows}


class ClaimedRow(Protocol):
    """An event's row as a claim reads it (``claim_columns``): a SQLAlchemy row."""

    @property
    def id(self) -> int: ...
    @property
    def _mapping(self) -> RowMapping: ...


class LoadedEvent(SimpleNamespace):
    """A claimed row's columns, whichever the claim read, with its payload: the event a
    worker runs. (Its attributes are read many times per event: a namespace's cost less
    than a row's.)"""

    @classmethod
    def of(cls, row: ClaimedRow, payload: Payload) -> LoadedEvent:
        return cls(**row._mapping, body=payload.body, headers=payload.headers)


# A transaction's first read takes at most this much (or one payload, if larger); later
# ones at most as much as it has run: a transaction cut short by its time reads again, in
# the next one, no more than it ran. 1 MiB holds a chunk of 200 events of 5 KB.
READ_AHEAD_BYTES = 1024 * 1024


class Payloads:
    """The payloads of one transaction's events, read as they run.

    The caller says which events it expects to run, in the order it expects to run them,
    with their sizes (``expect``), and takes each one's payload as it runs it, with the
    row it claimed (``take``). A payload not read yet is read in one statement with
    those of the next expected events, as many as fit, with the payloads read and not
    taken yet, within ``budget`` bytes (by ``payload_size``) and within what the
    transaction has taken so far (``READ_AHEAD_BYTES`` at first): a chunk of small events
    costs one statement, and a payload larger than the budget is read alone. A payload
    taken is forgotten here, so that once its event has run nothing holds it.
    """

    def __init__(self, session: Session, budget: int) -> None:
        self.session = session
        self.budget = budget
        self._expected: dict[int, int] = {}  # event id: payload size, in the order expected
        self._read: dict[int, Payload] = {}  # read, not taken yet
        self._taken = 0  # bytes

    def expect(self, rows: Iterable[Any]) -> None:
        """Rows (with ``id`` and ``payload_size``) of events that are to run next, in their
        order; one expected already keeps its place."""
        for row in rows:
            self._expected.setdefault(row.id, row.payload_size or 0)

    def take(self, row: ClaimedRow) -> LoadedEvent:
        """The claimed row with its payload, read now if it was not read yet (alone, if
        the event was not expected)."""
        if row.id not in self._read:
            self._read_from(row.id)
        self._taken += self._expected.pop(row.id, 0)
        return LoadedEvent.of(row, self._read.pop(row.id, NO_PAYLOAD))

    def _read_from(self, first: int) -> None:
        """Read ``first``'s payload and those of the events expected after it that fit."""
        limit = min(self.budget, max(READ_AHEAD_BYTES, self._taken))
        held = sum(self._expected.get(event_id, 0) for event_id in self._read)
        size = self._expected.get(first, 0)
        if held + size > limit:
            self._read.clear()  # read again when their turn comes
            held = 0
        group, total = [first], held + size
        after = False
        for event_id, expected in self._expected.items():
            if event_id == first:
                after = True
            elif after and event_id not in self._read:
                if total + expected > limit:
                    break
                group.append(event_id)
                total += expected
        self._read.update(read_payloads(self.session, group))
