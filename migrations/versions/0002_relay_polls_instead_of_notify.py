"""the relay polls the outbox; drop the NOTIFY trigger

A transaction that NOTIFYs takes a global lock at commit, so every ingest commit
queued behind every other: pgbench ran the ingest transaction at half the rate with
the trigger as without it. An empty outbox poll is one index scan.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 16:00:00
"""

from __future__ import annotations

from importlib import import_module

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The trigger and its function as 0001 made them: the downgrade puts back just that.
CORE_TABLES = import_module("hooklatch.migrations.versions.0001_create_core_tables")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS outbox_notify ON outbox")
        op.execute("DROP FUNCTION IF EXISTS hooklatch_outbox_notify()")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(CORE_TABLES.NOTIFY_FUNCTION)
        op.execute(CORE_TABLES.NOTIFY_TRIGGER)
