"""an index of the replays' outbox rows not handed to a job yet

Replays travel on a queue of their own, and the relay fills each queue from its own rows.
While live jobs wait for the workers, it looks for replay rows alone; through the index of
every row not handed out, that walked the whole live backlog (an outage's, say) on every
poll to find the few replays behind it. This index holds the replays' waiting rows only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

NAME = "ix_outbox_replays_undispatched"
WAITING_REPLAYS = sa.text("job_id IS NULL AND replay_id IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        NAME, "outbox", ["id"], postgresql_where=WAITING_REPLAYS, sqlite_where=WAITING_REPLAYS
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="outbox")
