"""GET /healthz: the process answers and the database does."""

from __future__ import annotations

from typing import Any

from flask import Blueprint
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.errors import StoreUnavailable
from hooklatch.runtime import current_runtime

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def health() -> Any:
    try:
        with current_runtime().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    return {"status": "ok"}
