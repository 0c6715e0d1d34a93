"""retention finds prunable payloads by index; relays and workers leave heartbeats

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

PRUNABLE = sa.text("body IS NOT NULL AND status IN ('processed', 'ignored')")


def upgrade() -> None:
    op.create_index(
        "ix_events_prunable",
        "events",
        ["received_at"],
        postgresql_where=PRUNABLE,
        sqlite_where=PRUNABLE,
    )
    op.create_table(
        "heartbeats",
        sa.Column("id", sa.String(length=300), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_heartbeats")),
    )
    op.create_index("ix_heartbeats_beat_at", "heartbeats", ["beat_at"])


def downgrade() -> None:
    op.drop_index("ix_heartbeats_beat_at", table_name="heartbeats")
    op.drop_table("heartbeats")
    op.drop_index("ix_events_prunable", table_name="events")
