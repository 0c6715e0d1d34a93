"""reconcile runs indexed by endpoint and id, in place of endpoint alone

The metrics read the last ended run of every endpoint with a credential at each read of
the database gauges, and the faces list an endpoint's latest runs. With an index on
endpoint_id alone, either every run of the endpoint was read (one an hour: thousands a
year) or, as PostgreSQL preferred, the whole table walked backwards by id until one of
the endpoint's came up: the full table for an endpoint that stopped running long ago.
An index on (endpoint_id, id) finds the newest of each at once, and serves what the old
one served.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27 12:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

NEW = "ix_reconcile_runs_endpoint_id_id"
OLD = "ix_reconcile_runs_endpoint_id"
TABLE = "reconcile_runs"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        op.create_index(NEW, TABLE, ["endpoint_id", "id"])
        op.drop_index(OLD, table_name=TABLE)
        return
    # Built without blocking the runs' writes, and able to run again after a release step
    # that stopped half way: an index left invalid by a stopped build is built again.
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {NEW}")
        op.create_index(NEW, TABLE, ["endpoint_id", "id"], postgresql_concurrently=True)
        op.drop_index(OLD, table_name=TABLE, postgresql_concurrently=True, if_exists=True)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.create_index(
            OLD, TABLE, ["endpoint_id"], postgresql_concurrently=True, if_not_exists=True
        )
        op.drop_index(NEW, table_name=TABLE, postgresql_concurrently=True, if_exists=True)
