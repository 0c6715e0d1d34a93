"""Probes. GET /livez: the process answers. GET /readyz: it can take deliveries (the
database answers, and its schema is at the migrations' head, or newer). GET /healthz: the process
answers and the database does (kept for the checks already pointed at it)."""

from __future__ import annotations

from functools import cache

from flask import Blueprint
from flask.typing import ResponseReturnValue
from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.db import READ_ONLY
from hooklatch.errors import SchemaNotCurrent, StoreUnavailable
from hooklatch.runtime import current_runtime

bp = Blueprint("health", __name__)
OK = {"status": "ok"}


@bp.get("/livez")
def live() -> ResponseReturnValue:
    return OK


@bp.get("/readyz")
def ready() -> ResponseReturnValue:
    try:
        with _reading() as connection:
            revisions = _revisions(connection)
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    heads, known = _migrations()
    # A revision this version does not know is a newer one: migrations run before the new
    # code starts, and the old processes still serve until they are replaced.
    if revisions != heads and revisions <= known:
        raise SchemaNotCurrent()
    return OK


@bp.get("/healthz")
def health() -> ResponseReturnValue:
    try:
        with _reading() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    return OK


def _reading() -> Connection:
    """A connection for a probe: it only reads (on SQLite, without the write lock)."""
    return current_runtime().engine.connect().execution_options(**{READ_ONLY: True})


def _revisions(connection: Connection) -> frozenset[str]:
    """The revisions the database says it is at; none before its first migration."""
    if not inspect(connection).has_table("alembic_version"):
        return frozenset()
    rows = connection.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(row[0] for row in rows)


@cache
def _migrations() -> tuple[frozenset[str], frozenset[str]]:
    """The revisions this version's migrations end at, and all of theirs."""
    from alembic.script import ScriptDirectory

    from hooklatch.migrations import alembic_config

    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    known = frozenset(script.revision for script in scripts.walk_revisions())
    return frozenset(scripts.get_heads()), known
