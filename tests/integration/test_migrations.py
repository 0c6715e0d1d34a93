"""Migrations build the schema from nothing, and the models and migrations agree."""

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

import hooklatch.models  # noqa: F401
from hooklatch.db import Base, make_engine
from hooklatch.migrations import alembic_config
from tests.support.database import fresh_database

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


SEED = [
    "INSERT INTO endpoints (id, name, provider, enabled, created_at) "
    "VALUES ('ep_1', 'one', 'stripe', 1, '2026-01-01')",
    "INSERT INTO events (id, endpoint_id, provider, external_id, type, received_at, status, "
    "attempts, body_sha256, mismatched_duplicates) "
    "VALUES (1, 'ep_1', 'stripe', 'evt_1', 'invoice.paid', '2026-01-01', 'pending', 1, 'x', 0)",
    "INSERT INTO replays (id, event_id, requested_by, requested_at, status) "
    "VALUES (1, 1, 'someone', '2026-01-01', 'pending')",
    "INSERT INTO attempts (id, event_id, number, outcome, handlers, started_at, finished_at) "
    "VALUES (1, 1, 1, 'failed', 'h', '2026-01-01', '2026-01-01')",
    "INSERT INTO outbox (id, event_id, replay_id, created_at) VALUES (1, 1, 1, '2026-01-01')",
]


def test_upgrading_a_sqlite_database_with_data_keeps_every_row(tmp_path):
    """Rebuilding a table in a batch migration must not cascade into its children."""
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    command.upgrade(alembic_config(url), "0002")
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            for statement in SEED:
                connection.exec_driver_sql(statement)
        command.upgrade(alembic_config(url), "head")
        with engine.connect() as connection:
            counts = {
                table: connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one()  # noqa: S608
                for table in ("events", "replays", "attempts", "outbox")
            }
    finally:
        engine.dispose()
    assert counts == {"events": 1, "replays": 1, "attempts": 1, "outbox": 1}


def test_a_release_step_stopped_half_way_through_0012_runs_again_to_the_end():
    """0012 builds its indexes outside a transaction, so a run that stops after them (its
    lock timeout reached, the step killed) leaves them behind, with 0011 still recorded:
    the next run finishes the job instead of failing on what is already there."""
    with fresh_database("hooklatch_migrations") as url:
        command.upgrade(alembic_config(url), "0011")
        engine = make_engine(url)
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql(SEED[0].replace("'stripe', 1,", "'stripe', true,"))
                connection.exec_driver_sql(SEED[1])
                connection.exec_driver_sql(
                    "ALTER TABLE events ADD COLUMN variant VARCHAR(64) DEFAULT '' NOT NULL, "
                    "ADD COLUMN conflicts_with_event_id BIGINT"
                )
                connection.exec_driver_sql(
                    "CREATE UNIQUE INDEX uq_events_endpoint_id_external_id_variant ON events "
                    "(endpoint_id, external_id, variant)"
                )
        finally:
            engine.dispose()
        _assert_upgrades_without_drift(url)


def test_a_release_step_stopped_half_way_through_0014_runs_again_to_the_end():
    """0014 adds its column, then builds its index outside a transaction: stopped during
    the build, 0013 is still recorded with the column there."""
    with fresh_database("hooklatch_migrations") as url:
        command.upgrade(alembic_config(url), "0013")
        engine = make_engine(url)
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql("ALTER TABLE replays ADD COLUMN after_attempt_id BIGINT")
        finally:
            engine.dispose()
        _assert_upgrades_without_drift(url)
