"""Probes. GET /livez: the process answers. GET /readyz: it can take deliveries (the
database answers, and its schema is at the migrations' head). GET /healthz: the process
answers and the database does (kept for the checks already pointed at it)."""

from __future__ import annotations

from functools import cache
from typing import Any

from flask import Blueprint
from sqlalchemy import Connection, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.errors import SchemaNotCurrent, StoreUnavailable
from hooklatch.runtime import current_runtime

bp = Blueprint("health", __name__)
OK = {"status": "ok"}


@bp.get("/livez")
def live() -> Any:
    return OK


@bp.get("/readyz")
def ready() -> Any:
    try:
        with current_runtime().engine.connect() as connection:
            revisions = _revisions(connection)
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    if revisions != _heads():
        raise SchemaNotCurrent()
    return OK


@bp.get("/healthz")
def health() -> Any:
    try:
        with current_runtime().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    return OK


def _revisions(connection: Connection) -> frozenset[str]:
    """The revisions the database says it is at; none before its first migration."""
    if not inspect(connection).has_table("alembic_version"):
        return frozenset()
    rows = connection.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(row[0] for row in rows)


@cache
def _heads() -> frozenset[str]:
    """The revisions this version's migrations end at."""
    from alembic.script import ScriptDirectory

    from hooklatch.migrations import alembic_config

    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())
