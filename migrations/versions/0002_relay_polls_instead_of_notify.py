"""the relay polls the outbox; drop the NOTIFY trigger

A transaction that NOTIFYs takes a global lock at commit, so every ingest commit
queued behind every other: pgbench ran the ingest transaction at half the rate with
the trigger as without it. An empty outbox poll is one index scan.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 16:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
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
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
        op.execute("DROP FUNCTION IF EXISTS hooklatch_outbox_notify()")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(NOTIFY_FUNCTION)
        op.execute(NOTIFY_TRIGGER)
