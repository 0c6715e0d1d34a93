"""Forwards recorded in the transaction that processes their events: an event whose
handlers succeeded (or that no handler matched) is handed on to every destination whose
filter it matches, once per destination. Nothing here commits."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Protocol, cast

from sqlalchemy import Table, select
from sqlalchemy.orm import Session

from hooklatch.db import insert_ignoring_conflict
from hooklatch.forwarding.models import PENDING, Destination, Forward


class Forwardable(Protocol):
    """What a filter looks at, and what a forward keeps, of a processed event."""

    @property
    def id(self) -> int: ...
    @property
    def endpoint_id(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def ordering_key(self) -> str | None: ...


@dataclass(frozen=True)
class Route:
    """A destination's filter, as read for one transaction."""

    destination_id: str
    endpoint_id: str | None
    provider: str | None
    types: tuple[str, ...]

    def matches(self, event: Forwardable) -> bool:
        if self.endpoint_id is not None and event.endpoint_id != self.endpoint_id:
            return False
        if self.provider is not None and event.provider != self.provider:
            return False
        return not self.types or any(fnmatchcase(event.type, glob) for glob in self.types)


def routes(session: Session) -> list[Route]:
    """Every destination's filter, paused ones too: a paused destination's forwards wait."""
    rows = session.execute(
        select(Destination.id, Destination.endpoint_id, Destination.provider, Destination.types)
    )
    return [
        Route(id_, endpoint, provider, tuple(types or ()))
        for id_, endpoint, provider, types in rows
    ]


def record(session: Session, events: Sequence[Forwardable], now: datetime) -> int:
    """A forward for each event and each destination it matches; an event forwarded to a
    destination already (a replay of a processed event) is not forwarded again. Returns
    how many were written. One read of the destinations, and one insert, per call."""
    if not events:
        return 0
    found = routes(session)
    rows = [
        {
            "destination_id": route.destination_id,
            "event_id": event.id,
            "ordering_key": event.ordering_key,
            "status": PENDING,
            "attempts": 0,
            "created_at": now,
        }
        for event in events
        for route in found
        if route.matches(event)
    ]
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    table = cast(Table, Forward.__table__)
    session.execute(insert_ignoring_conflict(dialect, table, ["event_id", "destination_id"]), rows)
    return len(rows)
