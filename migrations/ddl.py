"""What the migrations write more than once, written once: the id type of the large
tables, a foreign key named as the models' naming convention names it, a partial index
built without blocking writes, and the lock timeout of a release step.

A migration's effect never changes: what a helper here emits must stay what it emits
today (tests/integration/test_migrations.py builds the schema from nothing and compares
it with the models). A new need gets a new helper."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

# BIGINT on PostgreSQL; on SQLite an INTEGER, so that the primary key is the rowid.
BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def foreign_key(table: str, column: str, target: str, *, ondelete: str) -> sa.ForeignKeyConstraint:
    """``table.column`` referencing ``target.id``, named fk_<table>_<column>_<target>."""
    return sa.ForeignKeyConstraint(
        [column], [f"{target}.id"], name=op.f(f"fk_{table}_{column}_{target}"), ondelete=ondelete
    )


def create_index_concurrently(
    name: str, table: str, columns: list[str], *, where: sa.TextClause
) -> None:
    """A partial index of the rows ``where`` holds for, on PostgreSQL built outside the
    migration's transaction without blocking writes (the old processes keep writing while
    the release step runs); on SQLite as any other."""
    with op.get_context().autocommit_block():
        op.create_index(
            name,
            table,
            columns,
            postgresql_where=where,
            sqlite_where=where,
            postgresql_concurrently=True,
        )


def lock_timeout() -> None:
    """On PostgreSQL, a lock that ingest's statement waits for (adding a column takes one)
    is given up after 10 s: the release step fails rather than hold deliveries behind a
    long transaction."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("SET LOCAL lock_timeout = '10s'")
