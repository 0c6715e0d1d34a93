"""Storing deliveries: each event once, with its outbox row, on the ingest connection.
Nothing here commits; the view owns the connection."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import NamedTuple, cast

from sqlalchemy import CTE, Connection, Insert, Table, bindparam, func, insert, select, update
from sqlalchemy.sql.dml import ReturningInsert

from hooklatch.db import UTCDateTime, insert_ignoring_conflict
from hooklatch.endpoints.service import ActiveEndpoint
from hooklatch.events.models import API, DEAD, PENDING, Event, OutboxEntry
from hooklatch.ingest.delivered import NO_CONFLICT, Conflict, Delivered, placement, utc
from hooklatch.ingest.statements import EXECUTE_STORE, POSTGRES_STORE, PREPARED_KEY
from hooklatch.jsontypes import JSONObject
from hooklatch.providers.base import IncomingEvent, Provider

log = logging.getLogger(__name__)

# Credentials of the hop in front of us are not the provider's and are not stored; nor
# are those the provider declares (Provider.credential_headers_for).
UNSTORED_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

ACCEPTED = "accepted"
DUPLICATE = "duplicate"


@dataclass(frozen=True)
class Recorded:
    id: int
    external_id: str
    status: str  # accepted | duplicate
    rearmed: bool = False
    # A conflicting delivery stored as an event of its own: the event it conflicts with.
    conflicts_with: int | None = None

    def as_json(self) -> JSONObject:
        return {
            "id": self.id,
            "external_id": self.external_id,
            "status": self.status,
            **({"rearmed": True} if self.rearmed else {}),
        }


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
    "repeats_event_id",
    "ordering_key",
    "ordering_position",
    "variant",
    "conflicts_with_event_id",
)
DEDUPE_KEY = ["endpoint_id", "external_id", "variant"]


@cache
def _store_statement(dialect: str) -> ReturningInsert[int]:
    """Other backends: insert one event unless stored already, returning its id."""
    return (
        # A mapped class's table is a Table (typed as any FromClause).
        insert_ignoring_conflict(dialect, cast(Table, Event.__table__), DEDUPE_KEY)
        .values({name: bindparam(name) for name in EVENT_COLUMNS})
        .returning(Event.id)
    )


class EndpointChanged(Exception):
    """The endpoint was disabled or its secrets changed since it was read."""


def record_events(
    connection: Connection,
    *,
    endpoint: ActiveEndpoint,
    provider: Provider,
    incoming: Sequence[IncomingEvent],
    headers: Mapping[str, str],
    body: bytes,
    now: datetime,
) -> list[Recorded]:
    """Store each event once; each new one gets its outbox row atomically with it.

    On PostgreSQL each event is one statement, which raises EndpointChanged (storing
    nothing) when the endpoint is no longer as ``endpoint`` describes it. Elsewhere a few
    statements, in the caller's transaction.
    """
    unique = {item.external_id: item for item in incoming}
    delivered = Delivered(
        endpoint=endpoint,
        provider=provider,
        headers=stored_headers(headers, provider.credential_headers_for(endpoint.options)),
        body=body,
        digest=hashlib.sha256(body).hexdigest(),
        compare_body=len(unique) == 1,
        now=now,
    )
    return [_store(connection, delivered, item) for item in unique.values()]


def _store(
    connection: Connection,
    delivered: Delivered,
    item: IncomingEvent,
    conflict: Conflict = NO_CONFLICT,
) -> Recorded:
    if connection.dialect.name == "postgresql":
        return _store_on_postgres(connection, delivered, item, conflict)
    return _store_elsewhere(connection, delivered, item, conflict)


def stored_headers(headers: Mapping[str, str], credentials: frozenset[str]) -> dict[str, str]:
    """The headers kept with an event: neither the hop's credentials nor the provider's."""
    return {k: v for k, v in headers.items() if k not in UNSTORED_HEADERS and k not in credentials}


def _store_on_postgres(
    connection: Connection, delivered: Delivered, item: IncomingEvent, conflict: Conflict
) -> Recorded:
    endpoint = delivered.endpoint
    placed = placement(delivered, item)
    new_id, repeats, fresh, *existing = connection.exec_driver_sql(
        EXECUTE_STORE if connection.info.get(PREPARED_KEY) else POSTGRES_STORE,
        {
            "endpoint_id": endpoint.id,
            "secret_ids": endpoint.secret_ids,
            "provider": endpoint.provider,
            "external_id": item.external_id,
            "type": item.type,
            "occurred_at": utc(item.occurred_at),
            "received_at": delivered.now,
            "body": delivered.body,
            "headers": json.dumps(delivered.headers),
            "body_sha256": delivered.digest,
            "compare_body": delivered.compare_body,
            "revision": endpoint.revision,
            "due_at": placed.due_at,
            "ordering_key": placed.key,
            "ordering_position": placed.position,
            "variant": conflict.variant,
            "conflicts_with": conflict.event_id,
        },
    ).one()
    if not fresh:
        raise EndpointChanged(endpoint.id)
    if new_id is not None:
        return _accepted(new_id, item, repeats, conflict)
    if existing[0] is None:
        # Stored by another request since this statement's snapshot: look it up.
        return _duplicate(connection, delivered, item, conflict)
    return _duplicate_of(connection, delivered, item, Existing(*existing))


def _store_elsewhere(
    connection: Connection, delivered: Delivered, item: IncomingEvent, conflict: Conflict
) -> Recorded:
    endpoint, now = delivered.endpoint, delivered.now
    placed = placement(delivered, item)
    repeats = None
    if delivered.compare_body:
        repeats = connection.execute(
            select(func.min(Event.id)).where(
                Event.endpoint_id == endpoint.id, Event.body_sha256 == delivered.digest
            )
        ).scalar_one()
    new_id: int | None = connection.execute(
        _store_statement(connection.dialect.name),
        {
            "endpoint_id": endpoint.id,
            "provider": endpoint.provider,
            "external_id": item.external_id,
            "type": item.type,
            "occurred_at": utc(item.occurred_at),
            "received_at": now,
            "status": PENDING,
            "attempts": 0,
            "next_attempt_at": placed.due_at,
            "body": delivered.body,
            "headers": delivered.headers,
            "body_sha256": delivered.digest,
            "mismatched_duplicates": 0,
            "repeats_event_id": repeats,
            "ordering_key": placed.key,
            "ordering_position": placed.position,
            "variant": conflict.variant,
            "conflicts_with_event_id": conflict.event_id,
        },
    ).scalar_one_or_none()
    if new_id is None:
        return _duplicate(connection, delivered, item, conflict)
    if placed.due_at <= now:  # a held event gets its row from the sweep when due
        connection.execute(insert(OutboxEntry).values(event_id=new_id, created_at=now))
    return _accepted(new_id, item, repeats, conflict)


def _accepted(
    new_id: int, item: IncomingEvent, repeats: int | None, conflict: Conflict
) -> Recorded:
    if conflict.event_id is not None:
        log.warning(
            "event %d (%s, %s) repeats the id of event %d with another body, and the id is "
            "not signed: stored as an event of its own, flagged as a conflict (a signed body "
            "sent under an id it was not sent with, or a sender that reused an id)",
            new_id,
            item.external_id,
            item.type,
            conflict.event_id,
            extra={"external_id": item.external_id},
        )
    if repeats is not None:
        log.warning(
            "event %d (%s, %s) repeats the body of event %d under another id or type: a "
            "replay of a signed body, or a sender that sends one body under several types",
            new_id,
            item.external_id,
            item.type,
            repeats,
            extra={"external_id": item.external_id},
        )
    return Recorded(new_id, item.external_id, ACCEPTED, conflicts_with=conflict.event_id)


def _queue_from(created: CTE) -> Insert:
    """INSERT INTO outbox (event_id, created_at) SELECT id, :created_at FROM <created>."""
    return insert(OutboxEntry).from_select(
        ["event_id", "created_at"],
        select(created.c.id, bindparam("created_at", type_=UTCDateTime())),
    )


def _duplicate(
    connection: Connection, delivered: Delivered, item: IncomingEvent, conflict: Conflict
) -> Recorded:
    existing = connection.execute(
        select(Event.id, Event.status, Event.body_sha256, Event.received_at, Event.origin).where(
            Event.endpoint_id == delivered.endpoint.id,
            Event.external_id == item.external_id,
            Event.variant == conflict.variant,
        )
    ).one()
    return _duplicate_of(connection, delivered, item, Existing(*existing))


class Existing(NamedTuple):
    """The stored event a delivery repeats."""

    id: int
    status: str
    digest: str
    first_received: datetime
    origin: str


def _duplicate_of(
    connection: Connection, delivered: Delivered, item: IncomingEvent, existing: Existing
) -> Recorded:
    event_id, status, first_received = existing.id, existing.status, existing.first_received
    if existing.origin == API:
        # Fetched from the provider's API by a reconcile, and now delivered as the
        # provider kept retrying: the same event, whose body the API writes its own way.
        log.info(
            "event %d, fetched from the provider's API, delivered too: a duplicate",
            event_id,
            extra={"external_id": item.external_id},
        )
    elif existing.digest != delivered.digest:
        connection.execute(
            update(Event)
            .where(Event.id == event_id)
            .values(mismatched_duplicates=Event.mismatched_duplicates + 1)
        )
        if delivered.keeps_apart(item):
            return _store(connection, delivered, item, Conflict(event_id, delivered.digest))
        why = (
            "the id is the sender's own (signed, or the endpoint says its retries change the body)"
            if item.id_signed
            else "the request carries several events"
        )
        log.warning(
            "event id reused with a different body: a duplicate, since %s",
            why,
            extra={"event_db_id": event_id, "external_id": item.external_id},
        )
    rearmed = False
    if status == DEAD:
        window = delivered.provider.retry_window
        if delivered.now - first_received <= window:  # the sender may still be retrying
            rearmed = rearm(connection, event_id, now=delivered.now)
        else:
            log.warning(
                "dead event %d not re-armed: first received %s, so this copy comes after "
                "the provider's retry window of %s (a replay?); `hooklatch events replay` "
                "runs it again",
                event_id,
                first_received.isoformat(),
                window,
                extra={"external_id": item.external_id},
            )
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
