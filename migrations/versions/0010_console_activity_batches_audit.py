"""the console: hourly activity, bulk replay batches, an audit log, tracebacks of failed
attempts, when each secret last verified a delivery, and dead events by index

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 13:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import create_index_concurrently, foreign_key, lock_timeout

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
DEAD = sa.text("status = 'dead'")


def upgrade() -> None:
    lock_timeout()  # the columns below are added under a lock ingest's statement waits for
    op.create_table(
        "audit_log",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    op.create_table(
        "replay_batches",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        sa.Column("watermark", sa.BigInteger(), nullable=False),
        sa.Column("matched", sa.Integer(), nullable=False),
        sa.Column("replayed", sa.Integer(), nullable=False),
        sa.Column("skipped", sa.Integer(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("advanced_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replay_batches")),
    )
    op.create_index(op.f("ix_replay_batches_status"), "replay_batches", ["status"])
    op.create_table(
        "replay_batch_items",
        sa.Column("batch_id", BIG_ID, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        foreign_key("replay_batch_items", "batch_id", "replay_batches", ondelete="CASCADE"),
        foreign_key("replay_batch_items", "event_id", "events", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("batch_id", "event_id", name=op.f("pk_replay_batch_items")),
    )
    op.create_index(op.f("ix_replay_batch_items_event_id"), "replay_batch_items", ["event_id"])
    op.create_table(
        "activity",
        sa.Column("hour", sa.DateTime(timezone=True), nullable=False),
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("outcome", sa.String(length=64), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        foreign_key("activity", "endpoint_id", "endpoints", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("hour", "endpoint_id", "outcome", name=op.f("pk_activity")),
    )
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("traceback", sa.Text(), nullable=True))
    with op.batch_alter_table("endpoint_secrets") as batch:
        batch.add_column(sa.Column("last_verified_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("replays") as batch:
        batch.add_column(sa.Column("batch_id", BIG_ID, nullable=True))
        batch.create_unique_constraint(
            op.f("uq_replays_batch_id_event_id"), ["batch_id", "event_id"]
        )
        batch.create_foreign_key(
            op.f("fk_replays_batch_id_replay_batches"),
            "replay_batches",
            ["batch_id"],
            ["id"],
            ondelete="SET NULL",
        )
    # Built without blocking writes on PostgreSQL: events is the table every delivery
    # writes to, and the old processes keep taking deliveries while the release step runs.
    create_index_concurrently("ix_events_dead", "events", ["id"], where=DEAD)


def downgrade() -> None:
    with op.batch_alter_table("replays") as batch:
        batch.drop_constraint(op.f("fk_replays_batch_id_replay_batches"), type_="foreignkey")
        batch.drop_constraint(op.f("uq_replays_batch_id_event_id"), type_="unique")
        batch.drop_column("batch_id")
    with op.get_context().autocommit_block():
        op.drop_index("ix_events_dead", table_name="events", postgresql_concurrently=True)
    with op.batch_alter_table("endpoint_secrets") as batch:
        batch.drop_column("last_verified_at")
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("traceback")
    op.drop_table("activity")
    op.drop_index(op.f("ix_replay_batch_items_event_id"), table_name="replay_batch_items")
    op.drop_table("replay_batch_items")
    op.drop_index(op.f("ix_replay_batches_status"), table_name="replay_batches")
    op.drop_table("replay_batches")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
