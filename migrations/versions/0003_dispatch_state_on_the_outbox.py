"""dispatch state lives on the outbox row, not on the event

The relay used to write job_id and dispatched_at onto each event: a second write of
the whole (wide) row per event, and a row lock that made a fast worker skip an event
the relay had not committed yet. Now the relay marks the outbox row and the worker
deletes it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 16:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("job_id", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_outbox_undispatched",
        "outbox",
        ["id"],
        postgresql_where=sa.text("job_id IS NULL"),
        sqlite_where=sa.text("job_id IS NULL"),
    )
    for table in ("events", "replays"):
        # ALTER TABLE ... DROP COLUMN (SQLite 3.35+), not a rebuild of the table.
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column("job_id")
            batch.drop_column("dispatched_at")


def downgrade() -> None:
    for table in ("events", "replays"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True))
            batch.add_column(sa.Column("job_id", sa.String(length=64), nullable=True))
    op.drop_index("ix_outbox_undispatched", table_name="outbox")
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("dispatched_at")
        batch.drop_column("job_id")
