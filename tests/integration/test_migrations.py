"""Migrations build the schema from nothing, and the models and migrations agree."""

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

import app.models  # noqa: F401
from app.db import Base, make_engine
from migrations import alembic_config
from tests.conftest import fresh_database

TABLES = {"endpoints", "endpoint_secrets", "events", "outbox", "replays", "attempts"}


def _assert_upgrades_without_drift(url):
    command.upgrade(alembic_config(url), "head")
    engine = make_engine(url)
    try:
        assert set(inspect(engine).get_table_names()) >= TABLES
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            assert compare_metadata(context, Base.metadata) == []
    finally:
        engine.dispose()


def test_migrations_upgrade_an_empty_postgres_database_with_no_drift():
    with fresh_database("hooklatch_migrations") as url:
        _assert_upgrades_without_drift(url)
        # No NOTIFY on the ingest commit (0002): it serialises commits on a global lock.
        assert _triggers(url) == 0
        command.downgrade(alembic_config(url), "0001")
        assert _triggers(url) == 1
        command.downgrade(alembic_config(url), "base")


def _triggers(url: str) -> int:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            count: int = connection.exec_driver_sql(
                "SELECT count(*) FROM pg_trigger WHERE tgname = 'outbox_notify'"
            ).scalar_one()
            return count
    finally:
        engine.dispose()


def test_migrations_upgrade_an_empty_sqlite_database_with_no_drift(tmp_path):
    _assert_upgrades_without_drift(f"sqlite:///{tmp_path / 'empty.sqlite3'}")
