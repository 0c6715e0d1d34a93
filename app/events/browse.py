"""Finding events: one filter for the console, the admin API, the CLI and bulk replay.

Pages are keyset pages, newest first (``id < before``), so that the hundredth page costs
what the first does at any table size. Each condition is chosen to stay on an index:

- no filter, or one on common statuses, provider, endpoint or type: the primary key,
  read backwards until a page is full;
- ``status=dead``: ``ix_events_dead``, which holds dead events only;
- ``status=pending``: ``ix_events_status_next_attempt_at``;
- a provider's event id: the unique ``(endpoint_id, external_id, variant)`` index, probed
  once per endpoint (a deployment has few), so no index on ``external_id`` alone is
  needed; it finds an event and the conflicting deliveries stored beside it;
- a received-at range: ``ix_events_received_at`` or the primary key, as the planner
  finds cheaper.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta

from psycopg2.errors import QueryCanceled
from sqlalchemy import ColumnElement, Select, func, select, text, tuple_
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, defer

from hooklatch.endpoints.models import Endpoint
from hooklatch.errors import BadRequest, storable
from hooklatch.events.models import STATUSES, Event

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
# How long one browsing statement may read before it is stopped (PostgreSQL).
BROWSE_TIMEOUT_MS = 5000
_AGO = re.compile(r"^(\d{1,6})([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
TEXT_LIMIT = 255  # events.type and events.external_id
MAX_AGE = timedelta(days=36_500)


@dataclass(frozen=True)
class EventFilter:
    """Which events; every field optional. ``type`` is a glob (``invoice.*``); ``since``
    and ``until`` bound ``received_at``."""

    status: str | None = None
    provider: str | None = None
    endpoint: str | None = None
    type: str | None = None
    external_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def parse(cls, values: Mapping[str, object], *, now: datetime) -> EventFilter:
        """From form fields, query parameters or JSON: empty values are absent; a bad one
        is a BadRequest that names it. ``since`` and ``until`` take an ISO 8601 time
        (UTC unless it says otherwise) or an age: ``90s``, ``30m``, ``2h``, ``7d``."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(k for k, v in values.items() if k not in known and v not in (None, ""))
        if unknown:
            raise BadRequest(
                f"unknown filter {unknown[0]!r} (known: {', '.join(sorted(known))})",
                reason="bad_parameter",
            )
        text = {k: _text(k, values.get(k)) for k in known}
        status = text["status"]
        if status is not None and status not in STATUSES:
            raise BadRequest(f"status must be one of {', '.join(STATUSES)}", reason="bad_parameter")
        return cls(
            status=status,
            provider=text["provider"],
            endpoint=text["endpoint"],
            type=text["type"],
            external_id=text["external_id"],
            since=_when("since", text["since"], now),
            until=_when("until", text["until"], now),
        )

    def as_dict(self) -> dict[str, str]:
        """The filter's set fields as text, as ``parse`` reads them back."""
        return {
            key: value.isoformat() if isinstance(value, datetime) else value
            for key, value in asdict(self).items()
            if value is not None
        }

    def is_empty(self) -> bool:
        return not self.as_dict()

    def conditions(self, session: Session) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = []
        if self.status:
            where.append(Event.status == self.status)
        if self.provider:
            where.append(Event.provider == self.provider)
        if self.endpoint:
            where.append(Event.endpoint_id == _endpoint_id(session, self.endpoint))
        if self.type:
            where.append(Event.type.like(glob_to_like(self.type), escape="\\"))
        if self.external_id:
            endpoints = (
                [_endpoint_id(session, self.endpoint)]
                if self.endpoint
                else list(session.scalars(select(Endpoint.id)))
            )
            pairs = [(endpoint, self.external_id) for endpoint in endpoints] or [("", "")]
            where.append(tuple_(Event.endpoint_id, Event.external_id).in_(pairs))
        if self.since:
            where.append(Event.received_at >= self.since)
        if self.until:
            where.append(Event.received_at < self.until)
        return where

    def select_ids(self, session: Session) -> Select[int]:
        return select(Event.id).where(*self.conditions(session))


def page(
    session: Session, events: EventFilter, *, before: int | None = None, limit: int = PAGE_SIZE
) -> tuple[Sequence[Event], int | None]:
    """One page, newest first, and the ``before`` of the next page (None: the last).
    Bodies and headers stay in the database: a list shows neither."""
    query = select(Event).options(defer(Event.body), defer(Event.headers))
    query = query.where(*events.conditions(session))
    if before is not None:
        query = query.where(Event.id < before)
    with bounded(session):
        rows = session.scalars(query.order_by(Event.id.desc()).limit(limit + 1)).all()
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1].id
    return rows, None


def oldest(
    session: Session, events: EventFilter, *, limit: int, newest: int | None = None
) -> Sequence[Event]:
    """The oldest ``limit`` events that match, with an id up to ``newest`` if given (a
    bulk replay's dry run shows them)."""
    query = select(Event).options(defer(Event.body), defer(Event.headers))
    if newest is not None:
        query = query.where(Event.id <= newest)
    with bounded(session):
        return session.scalars(
            query.where(*events.conditions(session)).order_by(Event.id).limit(limit)
        ).all()


def count(
    session: Session,
    events: EventFilter,
    *,
    up_to: int | None = None,
    newest: int | None = None,
) -> int:
    """How many events match, with an id up to ``newest`` if given (at most ``up_to``+1
    counted, when given: enough to tell a batch over its cap without counting millions)."""
    ids = events.select_ids(session)
    if newest is not None:
        ids = ids.where(Event.id <= newest)
    if up_to is not None:
        ids = ids.order_by(Event.id).limit(up_to + 1)
    with bounded(session):
        return int(session.scalar(select(func.count()).select_from(ids.subquery())) or 0)


@contextmanager
def bounded(session: Session) -> Iterator[None]:
    """A filter that matches few events among millions without an index for it (a type
    that never occurs) reads the whole table: on PostgreSQL such a read is stopped after
    BROWSE_TIMEOUT_MS and answered with what to do instead."""
    postgres = session.get_bind().dialect.name == "postgresql"
    if postgres:
        session.execute(text(f"SET LOCAL statement_timeout = {BROWSE_TIMEOUT_MS}"))
    try:
        yield
    except OperationalError as exc:
        if not isinstance(exc.orig, QueryCanceled):
            raise
        raise BadRequest(
            f"this filter read events for more than {BROWSE_TIMEOUT_MS // 1000} s without "
            "finishing: narrow it with a received-at range (since, until), an endpoint or "
            "a status",
            reason="filter_too_broad",
        ) from exc
    if postgres:  # the rest of the transaction is not bounded
        session.execute(text("SET LOCAL statement_timeout = 0"))


def glob_to_like(pattern: str) -> str:
    """``invoice.*`` → ``invoice.%``; ``?`` is one character; SQL's own wildcards and the
    escape character in the pattern match themselves."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def _endpoint_id(session: Session, ref: str) -> str:
    """An endpoint by id or by name; an unknown one matches no event."""
    found = session.scalar(select(Endpoint.id).where((Endpoint.id == ref) | (Endpoint.name == ref)))
    return found or ""


def _text(name: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be text", reason="bad_parameter")
    value = value.strip()
    if not value:
        return None
    if len(value) > TEXT_LIMIT or not storable(value):
        raise BadRequest(
            f"{name} must be at most {TEXT_LIMIT} characters, with no NUL or lone surrogate",
            reason="bad_parameter",
        )
    return value


def _when(name: str, value: str | None, now: datetime) -> datetime | None:
    if value is None:
        return None
    ago = _AGO.match(value)
    if ago:
        span = timedelta(**{_UNITS[ago[2]]: int(ago[1])})
        if span > MAX_AGE:
            raise BadRequest(
                f"{name} reaches back at most {MAX_AGE.days} days", reason="bad_parameter"
            )
        return now - span
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise BadRequest(
            f"{name} must be an ISO 8601 time (2026-11-25T08:00) or an age (90s, 30m, 2h, 7d)",
            reason="bad_parameter",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
