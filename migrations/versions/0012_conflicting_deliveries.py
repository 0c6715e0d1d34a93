"""conflicting deliveries: an event id repeated with another body, where the provider
does not sign the id, is stored as an event of its own (events.variant, the dedupe key
now (endpoint_id, external_id, variant), and events.conflicts_with_event_id)

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

OLD_KEY = "uq_events_endpoint_id_external_id"
NEW_KEY = "uq_events_endpoint_id_external_id_variant"
CONFLICTS = sa.text("conflicts_with_event_id IS NOT NULL")


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    if postgres:
        # Adding columns takes a lock that ingest's statement waits for: fail the release
        # step rather than hold deliveries behind a long transaction.
        op.execute("SET LOCAL lock_timeout = '10s'")
    with op.batch_alter_table("events") as batch:
        batch.add_column(
            sa.Column("variant", sa.String(length=64), server_default="", nullable=False)
        )
        batch.add_column(sa.Column("conflicts_with_event_id", sa.BigInteger(), nullable=True))
    if not postgres:
        with op.batch_alter_table("events") as batch:
            batch.drop_constraint(OLD_KEY, type_="unique")
            batch.create_unique_constraint(NEW_KEY, ["endpoint_id", "external_id", "variant"])
        op.create_index("ix_events_conflicts", "events", ["endpoint_id"], sqlite_where=CONFLICTS)
        return
    # Built without blocking writes: events is the table every delivery writes to, and
    # the old processes keep taking deliveries while the release step runs. (An index
    # left invalid by an earlier attempt that failed is built again.)
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEW_KEY}")
        op.execute(
            f"CREATE UNIQUE INDEX CONCURRENTLY {NEW_KEY} ON events "
            "(endpoint_id, external_id, variant)"
        )
        op.create_index(
            "ix_events_conflicts",
            "events",
            ["endpoint_id"],
            postgresql_where=CONFLICTS,
            postgresql_concurrently=True,
        )
    op.execute("SET LOCAL lock_timeout = '10s'")
    # The new key takes over: from here, web processes of the previous version, whose
    # statement names the old key, answer 503 until they are replaced (providers retry).
    op.execute(
        f"ALTER TABLE events DROP CONSTRAINT {OLD_KEY}, "
        f"ADD CONSTRAINT {NEW_KEY} UNIQUE USING INDEX {NEW_KEY}"
    )


def downgrade() -> None:
    # Refused while conflicting deliveries are stored: the old key cannot hold them, and
    # dropping them would lose events.
    conflicts = op.get_bind().execute(sa.text("SELECT count(*) FROM events WHERE variant <> ''"))
    if conflicts.scalar_one():
        raise RuntimeError(
            "events holds conflicting deliveries (variant <> ''): the dedupe key before "
            "0012 cannot hold them; move or delete them first"
        )
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.drop_index("ix_events_conflicts", table_name="events", postgresql_concurrently=True)
    else:
        op.drop_index("ix_events_conflicts", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_constraint(NEW_KEY, type_="unique")
        batch.create_unique_constraint(OLD_KEY, ["endpoint_id", "external_id"])
        batch.drop_column("conflicts_with_event_id")
        batch.drop_column("variant")
