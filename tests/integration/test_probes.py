"""/livez says the process answers; /readyz that it can take deliveries: the database
answers and its schema is not older than this version's. /healthz keeps its meaning."""

from dataclasses import replace

import pytest
from alembic import command

from hooklatch.migrations import alembic_config
from tests.support.database import fresh_database
from tests.support.processes import free_port, with_port


@pytest.fixture
def app_on(app_with):
    """A test client of an app whose database is ``url``."""
    return lambda url: app_with(database_url=url).test_client()


def test_a_process_whose_schema_is_current_is_live_and_ready(client):
    live = client.get("/livez")
    assert (live.status_code, live.json) == (200, {"status": "ok"})
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json) == (200, {"status": "ok"})
    assert client.get("/healthz").status_code == 200
    assert client.head("/readyz").status_code == 200


def test_without_its_database_a_process_is_live_but_not_ready(app_on, settings):
    client = app_on(with_port(settings.database_url, free_port()))
    assert client.get("/livez").status_code == 200
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json["error"] == "store_unavailable"
    assert ready.headers["Retry-After"] == "5"
    assert client.get("/healthz").status_code == 503


@pytest.mark.parametrize("revision", [None, "0006"])
def test_a_schema_not_at_the_migrations_head_is_not_ready(app_on, revision):
    with fresh_database("hooklatch_probes") as url:
        if revision is not None:
            command.upgrade(alembic_config(url), revision)
        client = app_on(url)
        assert client.get("/livez").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json["error"] == "schema_not_current"
        assert "hooklatch db upgrade" in ready.json["message"]
        client.application.extensions["hooklatch"].dispose()
        command.upgrade(alembic_config(url), "head")
        assert app_on(url).get("/readyz").status_code == 200


def test_a_schema_newer_than_this_version_is_ready(app_on):
    """Migrations run before the new version starts: the old processes serve meanwhile."""
    with fresh_database("hooklatch_probes") as url:
        command.upgrade(alembic_config(url), "head")
        client = app_on(url)
        runtime = client.application.extensions["hooklatch"]
        with runtime.engine.begin() as connection:
            connection.exec_driver_sql("UPDATE alembic_version SET version_num = 'later_one'")
        assert client.get("/readyz").status_code == 200
        runtime.dispose()


def test_on_sqlite_the_probes_do_not_wait_for_a_writer(settings, app_with, tmp_path):
    """Every SQLite transaction hooklatch opens takes the write lock (BEGIN IMMEDIATE);
    a probe only reads, and must not queue behind a writer for the 30 s busy timeout."""
    import sqlite3

    embedded = replace(settings, database_url=None, redis_url=None, instance_path=tmp_path)
    command.upgrade(alembic_config(embedded.sqlalchemy_url), "head")
    client = app_with(database_url=None, redis_url=None, instance_path=tmp_path).test_client()
    writer = sqlite3.connect(tmp_path / "hooklatch.sqlite3", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        assert client.get("/readyz").status_code == 200
        assert client.get("/healthz").status_code == 200
    finally:
        writer.execute("ROLLBACK")
        writer.close()
