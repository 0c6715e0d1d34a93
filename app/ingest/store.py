"""Ingest, dedupe and replay requests. Functions take the session first and never commit."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Insert, bindparam, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db import UTCDateTime
from app.endpoints.service import ActiveEndpoint
from app.errors import NotFound
from app.events.models import DEAD, PENDING, Event, OutboxEntry, Replay
from app.providers.base import IncomingEvent

log = logging.getLogger(__name__)

# Credentials of the hop in front of us are not the provider's and are not stored.
UNSTORED_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

ACCEPTED = "accepted"
DUPLICATE = "duplicate"


@dataclass(frozen=True)
class Recorded:
    id: int
    external_id: str
    status: str  # accepted | duplicate
    rearmed: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "external_id": self.external_id,
            "status": self.status,
            **({"rearmed": True} if self.rearmed else {}),
        }


def insert_ignoring_conflict(dialect: str, table: Any, columns: list[str]) -> Insert:
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=columns)
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=columns)
    raise NotImplementedError(f"no conflict-free insert for {dialect}")


EVENT_COLUMNS = (
    "endpoint_id",
    "provider",
    "external_id",
    "type",
    "occurred_at",
    "received_at",
    "status",
    "attempts",
    "next_attempt_at",
    "body",
    "headers",
    "body_sha256",
    "mismatched_duplicates",
)

# PostgreSQL: the event, its outbox row and the check that the endpoint is still enabled
# with the secrets the request was verified against, in one statement. It is atomic by
# itself, so the ingest connection autocommits: one round trip in all. Hand-written and
# run as is: building and caching an SQLAlchemy statement costs more than running it.
POSTGRES_STORE = """
WITH guard AS (
    SELECT 1 FROM endpoints
    WHERE id = %(endpoint_id)s AND enabled
      AND (SELECT coalesce(string_agg(s.id::text, ',' ORDER BY s.id), '')
           FROM endpoint_secrets AS s WHERE s.endpoint_id = %(endpoint_id)s) = %(secret_ids)s
),
created AS (
    INSERT INTO events (endpoint_id, provider, external_id, type, occurred_at, received_at,
        status, attempts, next_attempt_at, body, headers, body_sha256, mismatched_duplicates)
    SELECT %(endpoint_id)s, %(provider)s, %(external_id)s, %(type)s,
        %(occurred_at)s::timestamptz, %(received_at)s::timestamptz, 'pending', 0,
        %(received_at)s::timestamptz, %(body)s, %(headers)s::json, %(body_sha256)s, 0
    FROM guard
    ON CONFLICT (endpoint_id, external_id) DO NOTHING
    RETURNING id
),
queued AS (
    INSERT INTO outbox (event_id, created_at) SELECT id, %(received_at)s::timestamptz FROM created
)
SELECT (SELECT id FROM created), EXISTS (SELECT 1 FROM guard), e.id, e.status, e.body_sha256
FROM (SELECT 1) AS one
LEFT JOIN events AS e ON e.endpoint_id = %(endpoint_id)s AND e.external_id = %(external_id)s
"""
# The join finds the stored event when this one is a duplicate: the statement's snapshot
# never sees the row its own insert created, so a new event leaves it empty.


_STORE_PARAMETERS = (
    ("endpoint_id", "text"),
    ("secret_ids", "text"),
    ("provider", "text"),
    ("external_id", "text"),
    ("type", "text"),
    ("occurred_at", "timestamptz"),
    ("received_at", "timestamptz"),
    ("body", "bytea"),
    ("headers", "text"),
    ("body_sha256", "text"),
)
# Planning that statement costs PostgreSQL as much as running it, so each ingest
# connection prepares it once (prepare_ingest_statements) and then only executes it.
PREPARED_KEY = "hooklatch_store_prepared"


def _positional(sql: str) -> str:
    for number, (name, _) in enumerate(_STORE_PARAMETERS, start=1):
        sql = sql.replace(f"%({name})s", f"${number}")
    return sql


PREPARE_STORE = (
    f"PREPARE hooklatch_store ({', '.join(kind for _, kind in _STORE_PARAMETERS)}) AS "
    + _positional(POSTGRES_STORE)
)
EXECUTE_STORE = (
    "EXECUTE hooklatch_store (" + ", ".join(f"%({name})s" for name, _ in _STORE_PARAMETERS) + ")"
)


def prepare_ingest_statements(dbapi_connection: Any, info: dict[str, Any]) -> None:
    """Run once on each new ingest connection (PostgreSQL)."""
    with dbapi_connection.cursor() as cursor:
        cursor.execute(PREPARE_STORE)
    dbapi_connection.commit()
    info[PREPARED_KEY] = True


@cache
def _store_statement(dialect: str) -> Any:
    """Other backends: insert one event unless stored already, returning its id."""
    return (
        insert_ignoring_conflict(dialect, Event.__table__, ["endpoint_id", "external_id"])
        .values({name: bindparam(name) for name in EVENT_COLUMNS})
        .returning(Event.id)
    )


class EndpointChanged(Exception):
    """The endpoint was disabled or its secrets changed since it was read."""


def record_events(
    connection: Connection,
    *,
    endpoint: ActiveEndpoint,
    incoming: Sequence[IncomingEvent],
    headers: Mapping[str, str],
    body: bytes,
    now: datetime,
) -> list[Recorded]:
    """Store each event once; each new one gets its outbox row atomically with it.

    On PostgreSQL each event is one statement, which raises EndpointChanged (storing
    nothing) when the endpoint is no longer as ``endpoint`` describes it. Elsewhere two
    statements, in the caller's transaction.
    """
    digest = hashlib.sha256(body).hexdigest()
    stored_headers = {k: v for k, v in headers.items() if k not in UNSTORED_HEADERS}
    postgres = connection.dialect.name == "postgresql"
    results = []
    for item in {item.external_id: item for item in incoming}.values():
        if postgres:
            new_id, fresh, stored_id, stored_status, stored_digest = connection.exec_driver_sql(
                EXECUTE_STORE if connection.info.get(PREPARED_KEY) else POSTGRES_STORE,
                {
                    "endpoint_id": endpoint.id,
                    "secret_ids": endpoint.secret_ids,
                    "provider": endpoint.provider,
                    "external_id": item.external_id,
                    "type": item.type,
                    "occurred_at": _utc(item.occurred_at),
                    "received_at": now,
                    "body": body,
                    "headers": json.dumps(stored_headers),
                    "body_sha256": digest,
                },
            ).one()
            if not fresh:
                raise EndpointChanged(endpoint.id)
            if new_id is None and stored_id is not None:
                results.append(
                    _duplicate_of(
                        connection, stored_id, stored_status, stored_digest, item, digest, now=now
                    )
                )
                continue
        else:
            new_id = _store_elsewhere(connection, endpoint, item, body, stored_headers, now)
        if new_id is None:
            # Stored by another request since this statement's snapshot: look it up.
            results.append(_duplicate(connection, endpoint.id, item, digest, now=now))
        else:
            results.append(Recorded(new_id, item.external_id, ACCEPTED))
    return results


def _utc(value: datetime | None) -> datetime | None:
    """A plugin's naive datetime is taken as UTC (docs/plugins.md), never as local time."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _store_elsewhere(
    connection: Connection,
    endpoint: ActiveEndpoint,
    item: IncomingEvent,
    body: bytes,
    headers: dict[str, str],
    now: datetime,
) -> int | None:
    new_id: int | None = connection.execute(
        _store_statement(connection.dialect.name),
        {
            "endpoint_id": endpoint.id,
            "provider": endpoint.provider,
            "external_id": item.external_id,
            "type": item.type,
            "occurred_at": _utc(item.occurred_at),
            "received_at": now,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": now,
            "body": body,
            "headers": headers,
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "mismatched_duplicates": 0,
        },
    ).scalar_one_or_none()
    if new_id is not None:
        connection.execute(insert(OutboxEntry).values(event_id=new_id, created_at=now))
    return new_id


def _queue_from(created: Any) -> Any:
    """INSERT INTO outbox (event_id, created_at) SELECT id, :created_at FROM <created>."""
    return insert(OutboxEntry).from_select(
        ["event_id", "created_at"],
        select(created.c.id, bindparam("created_at", type_=UTCDateTime())),
    )


def _duplicate(
    connection: Connection, endpoint_id: str, item: IncomingEvent, digest: str, *, now: datetime
) -> Recorded:
    existing = connection.execute(
        select(Event.id, Event.status, Event.body_sha256).where(
            Event.endpoint_id == endpoint_id, Event.external_id == item.external_id
        )
    ).one()
    return _duplicate_of(
        connection, existing.id, existing.status, existing.body_sha256, item, digest, now=now
    )


def _duplicate_of(
    connection: Connection,
    event_id: int,
    status: str,
    stored_digest: str,
    item: IncomingEvent,
    digest: str,
    *,
    now: datetime,
) -> Recorded:
    if stored_digest != digest:
        log.warning(
            "event id reused with a different body",
            extra={"event_db_id": event_id, "external_id": item.external_id},
        )
        connection.execute(
            update(Event)
            .where(Event.id == event_id)
            .values(mismatched_duplicates=Event.mismatched_duplicates + 1)
        )
    rearmed = status == DEAD and rearm(connection, event_id, now=now)
    return Recorded(event_id, item.external_id, DUPLICATE, rearmed=rearmed)


def rearm(connection: Connection, event_id: int, *, now: datetime) -> bool:
    """A provider re-sent an event that died here: give it a fresh round of attempts."""
    revived = (
        update(Event)
        .where(Event.id == event_id, Event.status == DEAD)
        .values(status=PENDING, attempts=0, next_attempt_at=now)
        .returning(Event.id)
    )
    if connection.dialect.name == "postgresql":
        # One statement, so it is atomic even on an autocommit connection.
        changed = revived.cte("revived")
        statement = select(changed.c.id).add_cte(_queue_from(changed).cte("queued"))
        done = connection.execute(statement, {"created_at": now}).first() is not None
    else:
        done = connection.execute(revived).first() is not None
        if done:
            connection.execute(insert(OutboxEntry).values(event_id=event_id, created_at=now))
    if done:
        log.info("dead event re-armed by a provider retry", extra={"event_db_id": event_id})
    return done


def request_replay(
    session: Session, event_id: int, *, requested_by: str, reason: str | None, now: datetime
) -> Replay:
    if session.get(Event, event_id) is None:
        raise NotFound(f"no event {event_id}")
    replay = Replay(
        event_id=event_id,
        requested_by=requested_by,
        reason=reason,
        requested_at=now,
        status=PENDING,
    )
    session.add(replay)
    session.flush()
    session.add(OutboxEntry(event_id=event_id, replay_id=replay.id, created_at=now))
    session.flush()
    return replay


def describe_event(event: Event) -> dict[str, Any]:
    return {
        "id": event.id,
        "endpoint_id": event.endpoint_id,
        "provider": event.provider,
        "external_id": event.external_id,
        "type": event.type,
        "status": event.status,
        "attempts": event.attempts,
        "received_at": _iso(event.received_at),
        "occurred_at": _iso(event.occurred_at),
        "next_attempt_at": _iso(event.next_attempt_at),
        "processed_at": _iso(event.processed_at),
        "last_error": event.last_error,
        "body_sha256": event.body_sha256,
        "mismatched_duplicates": event.mismatched_duplicates,
    }


def event_history(session: Session, event: Event) -> dict[str, Any]:
    from app.events.models import Attempt

    attempts = session.scalars(
        select(Attempt).where(Attempt.event_id == event.id).order_by(Attempt.id)
    ).all()
    replays = session.scalars(
        select(Replay).where(Replay.event_id == event.id).order_by(Replay.id)
    ).all()
    return {
        **describe_event(event),
        "attempts_log": [
            {
                "number": a.number,
                "outcome": a.outcome,
                "replay_id": a.replay_id,
                "handlers": [h for h in a.handlers.split(",") if h],
                "error": a.error,
                "started_at": _iso(a.started_at),
                "finished_at": _iso(a.finished_at),
            }
            for a in attempts
        ],
        "replays": [describe_replay(r) for r in replays],
    }


def describe_replay(replay: Replay) -> dict[str, Any]:
    return {
        "id": replay.id,
        "event_id": replay.event_id,
        "status": replay.status,
        "requested_by": replay.requested_by,
        "reason": replay.reason,
        "requested_at": _iso(replay.requested_at),
        "finished_at": _iso(replay.finished_at),
        "error": replay.error,
    }


def list_events(session: Session, *, status: str | None = None, limit: int = 50) -> Sequence[Event]:
    query = select(Event).order_by(Event.id.desc()).limit(limit)
    if status:
        query = query.where(Event.status == status)
    return session.scalars(query).all()


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
