"""attempts are found by replay: deleting a replay no longer scans every attempt

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 12:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import create_index_concurrently

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

REPLAYED = sa.text("replay_id IS NOT NULL")


def upgrade() -> None:
    # Built without blocking writes on PostgreSQL: attempts is the largest table, and the
    # old processes keep writing to it while the release step runs.
    create_index_concurrently("ix_attempts_replay_id", "attempts", ["replay_id"], where=REPLAYED)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index(
            "ix_attempts_replay_id",
            table_name="attempts",
            postgresql_concurrently=True,
        )
