"""Migration 0005 removes credential headers from the events stored before it, on
PostgreSQL and SQLite, and leaves every other header and row alone."""

import json
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from alembic import command
from sqlalchemy import text

from hooklatch.db import make_engine
from hooklatch.migrations import alembic_config
from tests.support.database import fresh_database

TOKEN = "glpat-stored-before-0005"
ENDPOINTS = [
    ("ep_gitlab", "gitlab", {"mode": "token"}),
    ("ep_signing", "gitlab", {"mode": "signing"}),
    ("ep_stripe", "stripe", None),
    ("ep_gone", "uninstalled-plugin", None),
]
EVENTS = [
    (1, "ep_gitlab", {"x-gitlab-token": TOKEN, "x-gitlab-event": "Push Hook"}),
    (2, "ep_gitlab", {"x-gitlab-event": "Issue Hook"}),
    (3, "ep_gitlab", None),
    (4, "ep_signing", {"x-gitlab-token": TOKEN, "webhook-id": "w1"}),
    (5, "ep_stripe", {"x-gitlab-token": "not a gitlab endpoint", "stripe-signature": "t=1"}),
    (6, "ep_gone", {"x-gitlab-token": "unknown provider"}),
]


ADD_ENDPOINT = text(
    "INSERT INTO endpoints (id, name, provider, enabled, created_at, options) "
    "VALUES (:id, :id, :p, true, '2026-01-01', :o)"
)
ADD_EVENT = text(
    "INSERT INTO events (id, endpoint_id, provider, external_id, type, received_at, status, "
    "attempts, body_sha256, mismatched_duplicates, headers) "
    "VALUES (:id, :e, 'x', 'e' || :id, 't', '2026-01-01', 'processed', 1, 'x', 0, :h)"
)


@contextmanager
def database(kind: str, tmp_path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'scrub.sqlite3'}"
    else:
        with fresh_database("hooklatch_scrub") as url:
            yield url


@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_credential_headers_stored_before_0005_are_removed(kind, tmp_path):
    with database(kind, tmp_path) as url:
        command.upgrade(alembic_config(url), "0004")
        engine = make_engine(url)
        try:
            with engine.begin() as connection:
                for endpoint_id, provider, options in ENDPOINTS:
                    connection.execute(
                        ADD_ENDPOINT, {"id": endpoint_id, "p": provider, "o": _json(options)}
                    )
                for event_id, endpoint_id, headers in EVENTS:
                    connection.execute(
                        ADD_EVENT, {"id": event_id, "e": endpoint_id, "h": _json(headers)}
                    )
            command.upgrade(alembic_config(url), "0005")
            with engine.connect() as connection:
                rows = connection.exec_driver_sql("SELECT id, headers FROM events ORDER BY id")
                after = {row[0]: _decoded(row[1]) for row in rows}
            command.downgrade(alembic_config(url), "0004")  # the scrub stays, the column goes
        finally:
            engine.dispose()
    assert after == {
        1: {"x-gitlab-event": "Push Hook"},
        2: {"x-gitlab-event": "Issue Hook"},
        3: None,
        4: {"webhook-id": "w1"},
        5: {"x-gitlab-token": "not a gitlab endpoint", "stripe-signature": "t=1"},
        6: {"x-gitlab-token": "unknown provider"},  # its declarations are unknown
    }


def _json(value):
    return None if value is None else json.dumps(value)


def _decoded(value):
    return json.loads(value) if isinstance(value, str) else value
