"""The test databases: a fresh PostgreSQL database per session, real Redis, counts; and
the embedded default's SQLite."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg2
from sqlalchemy import text

PG_ADMIN = os.environ.get("HOOKLATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("HOOKLATCH_TEST_REDIS", "redis://127.0.0.1:6379/0")
TABLES = (
    "attempts",
    "outbox",
    "replays",
    "events",
    "endpoint_secrets",
    "refusals",
    "endpoints",
    "heartbeats",
    "activity",
    "audit_log",
    "replay_batch_items",
    "replay_batches",
    "ordering_keys",
    "console_sessions",
    "token_failures",
    "forwards",
    "destinations",
    "test_effects",
    "test_runs",
    "test_seen",
)


def _admin_exec(sql: str) -> None:
    connection = psycopg2.connect(PG_ADMIN)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql)
    connection.close()


@contextmanager
def fresh_database(prefix: str = "hooklatch_test") -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin_exec(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        _admin_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sqlite_settings(settings: Any, instance_path: Path, **changes: Any) -> Any:
    """``settings`` as the embedded default runs them (and ``changes``): SQLite under
    ``instance_path``, migrated to head, and no Redis."""
    from alembic import command

    from hooklatch.migrations import alembic_config

    sqlite = replace(
        settings, database_url=None, redis_url=None, instance_path=instance_path, **changes
    )
    sqlite.instance_path.mkdir(exist_ok=True)
    command.upgrade(alembic_config(sqlite.sqlalchemy_url), "head")
    return sqlite


def count(runtime: Any, sql: str, **params: Any) -> int:
    with runtime.engine.connect() as connection:
        return int(connection.execute(text(sql), params).scalar_one())


def load_event(runtime: Any, event_id: int) -> Any:
    """The stored event, read in a session of its own."""
    from hooklatch.events.models import Event

    with runtime.session_factory() as session:
        return session.get(Event, event_id)


def stored_for(runtime: Any, endpoint_id: str) -> int:
    """How many events an endpoint has stored."""
    return count(runtime, "SELECT count(*) FROM events WHERE endpoint_id = :e", e=endpoint_id)
