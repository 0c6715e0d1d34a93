"""conflicting deliveries: an event id repeated with another body, where the provider does
not sign the id, is stored as an event of its own (events.variant, the dedupe key now
(endpoint_id, external_id, variant), and events.conflicts_with_event_id)

On PostgreSQL every step can be run again: the indexes are built outside a transaction
(without blocking writes), so a release step that stops half way (killed, or its lock
timeout reached) leaves some done, and the next run does the rest.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 15:00:00
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op
from sqlalchemy.exc import OperationalError

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

OLD_KEY = "uq_events_endpoint_id_external_id"
NEW_KEY = "uq_events_endpoint_id_external_id_variant"
CONFLICTS = sa.text("conflicts_with_event_id IS NOT NULL")
# The swap of the keys waits this long for its lock each time, this many times: a worker's
# transaction holds events' rows for a chunk (under a second), and every delivery waits
# behind the waiting swap, so it never waits long.
SWAP_LOCK_TIMEOUT = "2s"
SWAP_TRIES = 5


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        _upgrade_elsewhere()
        return
    if not _column_exists("events", "conflicts_with_event_id"):  # (a run again takes no lock)
        op.execute("SET LOCAL lock_timeout = '10s'")
        op.execute(
            "ALTER TABLE events ADD COLUMN IF NOT EXISTS variant VARCHAR(64) DEFAULT '' "
            "NOT NULL, ADD COLUMN IF NOT EXISTS conflicts_with_event_id BIGINT"
        )
    # Built without blocking writes: events is the table every delivery writes to, and
    # the old processes keep taking deliveries while the release step runs. An index an
    # earlier run left behind (perhaps invalid) is built again.
    with op.get_context().autocommit_block():
        if _constraint_exists(OLD_KEY):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEW_KEY}")
            op.execute(
                f"CREATE UNIQUE INDEX CONCURRENTLY {NEW_KEY} ON events "
                "(endpoint_id, external_id, variant)"
            )
        op.execute("DROP INDEX CONCURRENTLY IF EXISTS ix_events_conflicts")
        op.execute(
            "CREATE INDEX CONCURRENTLY ix_events_conflicts ON events (endpoint_id) "
            "WHERE conflicts_with_event_id IS NOT NULL"
        )
        if _constraint_exists(OLD_KEY):
            _swap_keys()


def _swap_keys() -> None:
    """The new key takes over. From here, web processes of the previous version, whose
    statement names the old key, answer deliveries 503 until they are replaced (docs/upgrading.md)."""
    swap = (
        f"ALTER TABLE events DROP CONSTRAINT {OLD_KEY}, "
        f"ADD CONSTRAINT {NEW_KEY} UNIQUE USING INDEX {NEW_KEY}"
    )
    op.execute(f"SET lock_timeout = '{SWAP_LOCK_TIMEOUT}'")
    for attempt in range(1, SWAP_TRIES + 1):
        try:
            op.execute(swap)
            break
        except OperationalError:
            if attempt == SWAP_TRIES:
                raise
            time.sleep(attempt)
    op.execute("RESET lock_timeout")


def _column_exists(table: str, column: str) -> bool:
    found = op.get_bind().execute(
        sa.text(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = :table AND column_name = :column"
        ),
        {"table": table, "column": column},
    )
    return found.first() is not None


def _constraint_exists(name: str) -> bool:
    found = op.get_bind().execute(
        sa.text("SELECT 1 FROM pg_constraint WHERE conname = :name"), {"name": name}
    )
    return found.first() is not None


def _upgrade_elsewhere() -> None:
    with op.batch_alter_table("events") as batch:
        batch.add_column(
            sa.Column("variant", sa.String(length=64), server_default="", nullable=False)
        )
        batch.add_column(sa.Column("conflicts_with_event_id", sa.BigInteger(), nullable=True))
    with op.batch_alter_table("events") as batch:
        batch.drop_constraint(OLD_KEY, type_="unique")
        batch.create_unique_constraint(NEW_KEY, ["endpoint_id", "external_id", "variant"])
    op.create_index("ix_events_conflicts", "events", ["endpoint_id"], sqlite_where=CONFLICTS)


def downgrade() -> None:
    # Refused while conflicting deliveries are stored: the old key cannot hold them, and
    # dropping them would lose events. (Found through ix_events_conflicts.)
    conflicts = op.get_bind().execute(
        sa.text("SELECT 1 FROM events WHERE conflicts_with_event_id IS NOT NULL LIMIT 1")
    )
    if conflicts.first() is not None:
        raise RuntimeError(
            "events holds conflicting deliveries (conflicts_with_event_id set): the dedupe "
            "key before 0012 cannot hold them; move or delete them first"
        )
    if op.get_bind().dialect.name == "postgresql":
        with op.get_context().autocommit_block():
            op.drop_index("ix_events_conflicts", table_name="events", postgresql_concurrently=True)
    else:
        op.drop_index("ix_events_conflicts", table_name="events")
    with op.batch_alter_table("events") as batch:
        batch.drop_constraint(NEW_KEY, type_="unique")
        batch.create_unique_constraint(OLD_KEY, ["endpoint_id", "external_id"])
        batch.drop_column("conflicts_with_event_id")
        batch.drop_column("variant")
