"""an index of the replays' outbox rows not handed to a job yet, and the newest attempt
of a replay's event when it was asked for

Replays travel on a queue of their own, and the relay fills each queue from its own rows.
While live jobs wait for the workers, it looks for replay rows alone; through the index of
every row not handed out, that walked the whole live backlog (an outage's, say) on every
poll to find the few replays behind it. This index holds the replays' waiting rows only.

``replays.after_attempt_id``: a replay whose event an attempt processed after it was asked
for (a provider's retry re-armed a dead event) is skipped; attempts' ids tell which came
later whatever the clocks of the hosts that wrote them.

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
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("replays") as batch:
            batch.add_column(sa.Column("after_attempt_id", sa.BigInteger(), nullable=True))
        op.create_index(NAME, "outbox", ["id"], sqlite_where=WAITING_REPLAYS)
        return
    # Every step can run again after a release step that stopped half way: the index is
    # built outside a transaction, without blocking writes (every delivery writes an
    # outbox row), and one left invalid by a stopped build is built again.
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("ALTER TABLE replays ADD COLUMN IF NOT EXISTS after_attempt_id BIGINT")
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NAME}")
        op.create_index(
            NAME, "outbox", ["id"], postgresql_where=WAITING_REPLAYS, postgresql_concurrently=True
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.drop_index(NAME, table_name="outbox", postgresql_concurrently=True, if_exists=True)
    with op.batch_alter_table("replays") as batch:
        batch.drop_column("after_attempt_id")
