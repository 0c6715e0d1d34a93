from __future__ import annotations

import os

from alembic import context
from sqlalchemy import pool

import hooklatch.models  # noqa: F401  (registers every table on Base.metadata)
from hooklatch.db import Base, make_engine

config = context.config
target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("no database URL: run `hooklatch db upgrade`, or set DATABASE_URL")
    return url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # A batch migration rebuilds a table by dropping it, and with foreign keys on,
            # SQLite's DROP TABLE cascades into every child row. (Outside a transaction:
            # the pragma is ignored inside one.)
            connection.connection.driver_connection.execute("PRAGMA foreign_keys=OFF")
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            compare_type=True,
            # Each migration commits on its own: the locks one takes (0012's on events) are
            # not held while the next ones run.
            transaction_per_migration=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
