"""the outbox rows of events a reconcile fetched, told apart, with an index of those not
handed to a job yet and one of the live rows not handed out

A reconcile that catches up on thousands of events stores them in minutes' worth of
outbox rows. Handed out in their order, they held every live event stored after them
until all were processed. Fetched events travel in a lane of their own, which workers
read after the live one: the relay fills each lane from its own rows, through its own
index, so neither poll walks the other's backlog.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 20:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_outbox_live_undispatched": sa.text("job_id IS NULL AND replay_id IS NULL AND NOT fetched"),
    "ix_outbox_fetched_undispatched": sa.text("job_id IS NULL AND fetched"),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("outbox") as batch:
            batch.add_column(
                sa.Column("fetched", sa.Boolean(), server_default=sa.false(), nullable=False)
            )
        for name, where in INDEXES.items():
            op.create_index(name, "outbox", ["id"], sqlite_where=where)
        return
    # Every step can run again after a release step that stopped half way: a constant
    # default rewrites nothing (PostgreSQL 11 and later), and the indexes are built
    # outside a transaction, without blocking writes (every delivery writes an outbox
    # row); one left invalid by a stopped build is built again.
    op.execute("SET LOCAL lock_timeout = '10s'")
    op.execute("ALTER TABLE outbox ADD COLUMN IF NOT EXISTS fetched BOOLEAN NOT NULL DEFAULT false")
    with op.get_context().autocommit_block():
        for name, where in INDEXES.items():
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.create_index(
                name, "outbox", ["id"], postgresql_where=where, postgresql_concurrently=True
            )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.drop_index(name, table_name="outbox", postgresql_concurrently=True, if_exists=True)
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("fetched")
