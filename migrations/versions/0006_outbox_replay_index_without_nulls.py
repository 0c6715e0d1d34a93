"""the outbox's replay_id index leaves out rows that are not replays

Finding due work asks for events with no outbox row of their own (``replay_id IS
NULL``). Without planner statistics (a burst swept before autovacuum analyses it, or
autovacuum off), PostgreSQL answered that by pairing this index, whose NULL entries are
every ordinary row, with the event_id index: each pending event read every outbox row,
quadratic in the backlog. Rows are only ever looked up by a replay's id, so the index
keeps those alone.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 14:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

NAME = "ix_outbox_replay_id"
REPLAYS_ONLY = sa.text("replay_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index(NAME, table_name="outbox")
    op.create_index(
        NAME, "outbox", ["replay_id"], postgresql_where=REPLAYS_ONLY, sqlite_where=REPLAYS_ONLY
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="outbox")
    op.create_index(NAME, "outbox", ["replay_id"])
