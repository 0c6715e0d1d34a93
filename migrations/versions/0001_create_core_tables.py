"""create core tables

Revision ID: 0001
Revises:
Create Date: 2026-11-21 15:04:33.661805
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import BIG_ID, foreign_key

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NOTIFY_FUNCTION = """
CREATE FUNCTION hooklatch_outbox_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hooklatch_outbox', '');
    RETURN NULL;
END;
$$
"""
NOTIFY_TRIGGER = """
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
FOR EACH STATEMENT EXECUTE FUNCTION hooklatch_outbox_notify()
"""


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoints")),
        sa.UniqueConstraint("name", name=op.f("uq_endpoints_name")),
    )
    op.create_table(
        "endpoint_secrets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        foreign_key("endpoint_secrets", "endpoint_id", "endpoints", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoint_secrets")),
    )
    op.create_index("ix_endpoint_secrets_endpoint_id", "endpoint_secrets", ["endpoint_id"])
    op.create_table(
        "events",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("provider", sa.String(length=64), nullable=False),
        sa.Column("external_id", sa.String(length=255), nullable=False),
        sa.Column("type", sa.String(length=255), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("processed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("headers", sa.JSON(), nullable=True),
        sa.Column("body_sha256", sa.String(length=64), nullable=False),
        sa.Column("mismatched_duplicates", sa.Integer(), nullable=False),
        foreign_key("events", "endpoint_id", "endpoints", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint(
            "endpoint_id", "external_id", name=op.f("uq_events_endpoint_id_external_id")
        ),
    )
    op.create_index("ix_events_received_at", "events", ["received_at"])
    op.create_index("ix_events_status_next_attempt_at", "events", ["status", "next_attempt_at"])
    op.create_table(
        "replays",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("requested_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("dispatched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        foreign_key("replays", "event_id", "events", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replays")),
    )
    op.create_index("ix_replays_event_id", "replays", ["event_id"])
    op.create_index("ix_replays_status", "replays", ["status"])
    op.create_table(
        "attempts",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=False),
        sa.Column("replay_id", BIG_ID, nullable=True),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("handlers", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        foreign_key("attempts", "event_id", "events", ondelete="CASCADE"),
        foreign_key("attempts", "replay_id", "replays", ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
    )
    op.create_index("ix_attempts_event_id", "attempts", ["event_id"])
    op.create_table(
        "outbox",
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("event_id", BIG_ID, nullable=False),
        sa.Column("replay_id", BIG_ID, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        foreign_key("outbox", "event_id", "events", ondelete="CASCADE"),
        foreign_key("outbox", "replay_id", "replays", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    op.create_index("ix_outbox_event_id", "outbox", ["event_id"])
    op.create_index("ix_outbox_replay_id", "outbox", ["replay_id"])

    if op.get_bind().dialect.name == "postgresql":
        # Wake the relays (LISTEN hooklatch_outbox) whenever work is written to the outbox,
        # including by the sweep; NOTIFY is delivered at commit, once per transaction.
        op.execute(NOTIFY_FUNCTION)
        op.execute(NOTIFY_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
        op.execute("DROP FUNCTION IF EXISTS hooklatch_outbox_notify()")
    op.drop_index("ix_outbox_replay_id", table_name="outbox")
    op.drop_index("ix_outbox_event_id", table_name="outbox")
    op.drop_table("outbox")
    op.drop_index("ix_attempts_event_id", table_name="attempts")
    op.drop_table("attempts")
    op.drop_index("ix_replays_status", table_name="replays")
    op.drop_index("ix_replays_event_id", table_name="replays")
    op.drop_table("replays")
    op.drop_index("ix_events_status_next_attempt_at", table_name="events")
    op.drop_index("ix_events_received_at", table_name="events")
    op.drop_table("events")
    op.drop_index("ix_endpoint_secrets_endpoint_id", table_name="endpoint_secrets")
    op.drop_table("endpoint_secrets")
    op.drop_table("endpoints")
