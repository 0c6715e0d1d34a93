"""per-entity ordering: endpoints' ordering settings, events' ordering key and position,
and the ordering_keys table (the stale guard's newest position, a key parked by a dead
event)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 22:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import create_index_concurrently, foreign_key, lock_timeout

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
KEYED_PENDING = sa.text("ordering_key IS NOT NULL AND status = 'pending'")


def upgrade() -> None:
    lock_timeout()  # adding columns takes a lock that ingest's statement waits for
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(
            sa.Column("ordering", sa.String(length=8), server_default="none", nullable=False)
        )
        batch.add_column(
            sa.Column("ordering_dead", sa.String(length=8), server_default="park", nullable=False)
        )
        batch.add_column(
            sa.Column("hold_seconds", sa.Integer(), server_default="0", nullable=False)
        )
        batch.add_column(sa.Column("ordering_key_path", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))
    with op.batch_alter_table("events") as batch:
        batch.add_column(sa.Column("ordering_key", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("ordering_position", sa.BigInteger(), nullable=True))
    op.create_table(
        "ordering_keys",
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("applied_position", sa.BigInteger(), nullable=True),
        sa.Column("applied_event_id", sa.BigInteger(), nullable=True),
        sa.Column("parked_event_id", BIG_ID, nullable=True),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        foreign_key("ordering_keys", "endpoint_id", "endpoints", ondelete="CASCADE"),
        foreign_key("ordering_keys", "parked_event_id", "events", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("endpoint_id", "key", name=op.f("pk_ordering_keys")),
    )
    op.create_index(op.f("ix_ordering_keys_updated_at"), "ordering_keys", ["updated_at"])
    # Empty at first (no event has a key yet), built without blocking ingest's writes.
    create_index_concurrently(
        "ix_events_ordering",
        "events",
        ["endpoint_id", "ordering_key", "ordering_position", "id"],
        where=KEYED_PENDING,
    )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index("ix_events_ordering", table_name="events", postgresql_concurrently=True)
    op.drop_index(op.f("ix_ordering_keys_updated_at"), table_name="ordering_keys")
    op.drop_table("ordering_keys")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("ordering_position")
        batch.drop_column("ordering_key")
    with op.batch_alter_table("endpoints") as batch:
        batch.drop_column("revision")
        batch.drop_column("ordering_key_path")
        batch.drop_column("hold_seconds")
        batch.drop_column("ordering_dead")
        batch.drop_column("ordering")
