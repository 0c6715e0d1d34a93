"""The admin API's blueprint: every route under /admin (the console's pages aside, which
sign people in: hooklatch.admin.console) asks for the admin token as a bearer token."""

from __future__ import annotations

from flask import Blueprint, request

from hooklatch.errors import Unauthorized
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
