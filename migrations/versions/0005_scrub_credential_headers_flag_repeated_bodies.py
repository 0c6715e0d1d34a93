"""credential headers removed from stored events; events that repeat an earlier body

Headers a provider declares as credentials (GitLab's X-Gitlab-Token) were stored with
every event and handed to handlers: they are removed from the events already stored, for
the endpoints whose installed provider declares them (endpoints of a provider that is
not installed are left as they are, and named in the log). This cannot be undone.

``events.repeats_event_id`` names the first event of the endpoint with the same body,
when an event arrives under another id or type with a body already stored; ingest finds
it through the new index on body_sha256 (a hash index on PostgreSQL).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

import logging
from typing import Any

import sqlalchemy as sa
from alembic import op

from hooklatch.providers.loading import load_providers

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

REPEATED = sa.text("repeats_event_id IS NOT NULL")
# Stored header names are lower case. PostgreSQL's events.headers is json, which has no
# operators of its own to remove a key.
SCRUB = {
    "postgresql": sa.text(
        "UPDATE events SET headers = (headers::jsonb - :name)::json "
        "WHERE endpoint_id = :endpoint_id AND headers::jsonb ? :name"
    ),
    "sqlite": sa.text(
        "UPDATE events SET headers = json_remove(headers, :path) "
        "WHERE endpoint_id = :endpoint_id AND json_type(headers, :path) IS NOT NULL"
    ),
}
ENDPOINTS = sa.table(
    "endpoints", sa.column("id"), sa.column("provider"), sa.column("options", sa.JSON)
)


def upgrade() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("repeats_event_id", sa.BigInteger(), nullable=True))
    op.create_index("ix_events_body_sha256", "events", ["body_sha256"], postgresql_using="hash")
    op.create_index(
        "ix_events_repeated_bodies",
        "events",
        ["endpoint_id"],
        postgresql_where=REPEATED,
        sqlite_where=REPEATED,
    )
    scrub_credential_headers(op.get_bind())


def scrub_credential_headers(connection: Any) -> None:
    if op.get_context().as_sql:
        log.warning("offline mode: stored credential headers are not removed by this script")
        return
    providers = load_providers()
    scrub = SCRUB[connection.dialect.name]
    for endpoint_id, name, options in connection.execute(sa.select(ENDPOINTS)).all():
        provider = providers.get(name)
        if provider is None:
            log.warning(
                "endpoint %s: provider %s is not installed, not scrubbed", endpoint_id, name
            )
            continue
        for header in sorted(provider.credential_headers_for(options or {})):
            done = connection.execute(
                scrub, {"endpoint_id": endpoint_id, "name": header, "path": f'$."{header}"'}
            )
            log.info("endpoint %s: %s removed from %d events", endpoint_id, header, done.rowcount)


def downgrade() -> None:
    op.drop_index("ix_events_repeated_bodies", table_name="events")
    op.drop_index("ix_events_body_sha256", table_name="events")
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.drop_column("repeats_event_id")
