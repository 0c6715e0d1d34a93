"""The PostgreSQL statement that stores one event, and its preparation on each ingest
connection."""

from __future__ import annotations

from collections.abc import MutableMapping
from contextlib import closing

from sqlalchemy.engine.interfaces import DBAPIConnection

# PostgreSQL: the event, its outbox row and the check that the endpoint is still enabled
# with the secrets the request was verified against, in one statement. It is atomic by
# itself, so the ingest connection autocommits: one round trip in all. Hand-written and
# run as is: building and caching an SQLAlchemy statement costs more than running it.
POSTGRES_STORE = """
WITH guard AS (
    SELECT 1 FROM endpoints
    WHERE id = %(endpoint_id)s AND enabled AND revision = %(revision)s
      AND (SELECT coalesce(string_agg(s.id::text, ',' ORDER BY s.id), '')
           FROM endpoint_secrets AS s WHERE s.endpoint_id = %(endpoint_id)s) = %(secret_ids)s
),
created AS (
    INSERT INTO events (endpoint_id, provider, external_id, type, occurred_at, received_at,
        status, attempts, next_attempt_at, body, headers, body_sha256, mismatched_duplicates,
        repeats_event_id, ordering_key, ordering_position, variant, conflicts_with_event_id)
    SELECT %(endpoint_id)s, %(provider)s, %(external_id)s, %(type)s,
        %(occurred_at)s::timestamptz, %(received_at)s::timestamptz, 'pending', 0,
        %(due_at)s::timestamptz, %(body)s, %(headers)s::json, %(body_sha256)s, 0,
        CASE WHEN %(compare_body)s THEN (
            SELECT min(r.id) FROM events AS r
            WHERE r.endpoint_id = %(endpoint_id)s AND r.body_sha256 = %(body_sha256)s
        ) END, %(ordering_key)s, %(ordering_position)s::bigint, %(variant)s,
        %(conflicts_with)s::bigint
    FROM guard
    ON CONFLICT (endpoint_id, external_id, variant) DO NOTHING
    RETURNING id, repeats_event_id
),
queued AS (
    INSERT INTO outbox (event_id, created_at) SELECT id, %(received_at)s::timestamptz FROM created
    WHERE %(due_at)s::timestamptz <= %(received_at)s::timestamptz
)
SELECT (SELECT id FROM created), (SELECT repeats_event_id FROM created),
    EXISTS (SELECT 1 FROM guard), e.id, e.status, e.body_sha256, e.received_at,
    e.origin
FROM (SELECT 1) AS one
LEFT JOIN events AS e ON e.endpoint_id = %(endpoint_id)s AND e.external_id = %(external_id)s
    AND e.variant = %(variant)s
"""
# An event held back by its endpoint's hold window (due_at later than received_at) gets
# no outbox row: the relay's sweep gives it one when it is due (hooklatch.ordering).
# ``variant`` is empty but for a conflicting delivery (hooklatch.ingest.store), which the
# same statement stores under its body's digest, naming the event it conflicts with.
# The join finds the stored event when this one is a duplicate: the statement's snapshot
# never sees the row its own insert created, so a new event leaves it empty. The lookup of
# an earlier event with the same body is one probe of the hash index ix_events_body_sha256;
# any row it finds has another external id, or this insert would be a conflict.


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
    ("compare_body", "boolean"),
    ("revision", "integer"),
    ("due_at", "timestamptz"),
    ("ordering_key", "text"),
    ("ordering_position", "bigint"),
    ("variant", "text"),
    ("conflicts_with", "bigint"),
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


def prepare_ingest_statements(
    dbapi_connection: DBAPIConnection, info: MutableMapping[str, object]
) -> None:
    """Run once on each new ingest connection (PostgreSQL): ``info`` is the pool's record
    of it."""
    with closing(dbapi_connection.cursor()) as cursor:
        cursor.execute(PREPARE_STORE)
    dbapi_connection.commit()
    info[PREPARED_KEY] = True
