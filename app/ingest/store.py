"""Storing deliveries: each event once, with its outbox row, on the ingest connection.
Nothing here commits; the view owns the connection."""

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

from hooklatch.db import UTCDateTime
from hooklatch.endpoints.service import ActiveEndpoint
from hooklatch.events.models import DEAD, PENDING, Event, OutboxEntry
from hooklatch.ingest.statements import EXECUTE_STORE, POSTGRES_STORE, PREPARED_KEY
from hooklatch.providers.base import IncomingEvent

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
