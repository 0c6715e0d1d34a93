"""The admin API's blueprint: every route under /admin (the console's pages aside, which
sign people in: hooklatch.admin.console) asks for the admin token as a bearer token."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from flask import Blueprint, request
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.errors import StoreUnavailable, Unauthorized
from hooklatch.operations.access import current_guard, request_address
from hooklatch.runtime import current_runtime

bp = Blueprint("admin", __name__, url_prefix="/admin")


@bp.before_request
def require_token() -> None:
    expected = current_runtime().settings.admin_token
    if not expected:
        raise Unauthorized(
            "the admin API is off: set HOOKLATCH_ADMIN_TOKEN", reason="admin_disabled"
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    bearer = given if scheme.lower() == "bearer" else ""
    # 429 while this address is locked out after too many failures, whatever it sends.
    if not current_guard().check(bearer, [expected], address=request_address()):
        raise Unauthorized("a valid 'Authorization: Bearer <admin token>' header is required")


@contextmanager
def store_errors_as_503() -> Iterator[None]:
    """503 ``store_unavailable`` where the database does not answer."""
    try:
        yield
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
