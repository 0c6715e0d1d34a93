"""forwarding: the destinations processed events are handed on to, and one forward per
event and destination

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import BIG_ID, foreign_key

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)

INDEXES = {
    "ix_forwards_pending": (["destination_id", "id"], "status = 'pending'"),
    "ix_forwards_keyed": (
        ["destination_id", "ordering_key", "id"],
        "ordering_key IS NOT NULL AND status != 'delivered'",
    ),
    "ix_forwards_dead": (["destination_id", "id"], "status = 'dead'"),
}


def upgrade() -> None:
    # New tables only: nothing the running processes use is locked or rewritten.
    op.create_table(
        "destinations",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("fingerprint", sa.String(length=12), nullable=False),
        sa.Column("shown", sa.String(length=500), nullable=False),
        sa.Column("endpoint_id", sa.String(length=40), nullable=True),
        sa.Column("provider", sa.String(length=64), nullable=True),
        sa.Column("types", sa.JSON(), nullable=False),
        sa.Column("rate_limit", sa.Float(), nullable=True),
        sa.Column("paused", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("updated_at", UTC_TIME, nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", UTC_TIME, nullable=True),
        sa.Column("delivered_total", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("failed_total", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("last_delivered_at", UTC_TIME, nullable=True),
        sa.Column("last_failed_at", UTC_TIME, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        foreign_key("destinations", "endpoint_id", "endpoints", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_destinations")),
        sa.UniqueConstraint("name", name=op.f("uq_destinations_name")),
    )
    op.create_index(op.f("ix_destinations_endpoint_id"), "destinations", ["endpoint_id"])
    op.create_table(
        "forwards",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("destination_id", sa.String(length=40), nullable=False),
        sa.Column("event_id", BIG_ID, nullable=False),
        sa.Column("ordering_key", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", UTC_TIME, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_TIME, nullable=False),
        sa.Column("delivered_at", UTC_TIME, nullable=True),
        foreign_key("forwards", "destination_id", "destinations", ondelete="CASCADE"),
        foreign_key("forwards", "event_id", "events", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forwards")),
        sa.UniqueConstraint(
            "event_id", "destination_id", name=op.f("uq_forwards_event_id_destination_id")
        ),
    )
    op.create_index(op.f("ix_forwards_event_id"), "forwards", ["event_id"])
    for name, (columns, where) in INDEXES.items():
        op.create_index(
            name,
            "forwards",
            columns,
            postgresql_where=sa.text(where),
            sqlite_where=sa.text(where),
        )


def downgrade() -> None:
    op.drop_table("forwards")
    op.drop_table("destinations")
