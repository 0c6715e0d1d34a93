"""The admin API: bearer-token protected; replay is explicit and audited."""

from __future__ import annotations

import hmac
import json
from typing import Any

from flask import Blueprint, request
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.errors import BadRequest, NotFound, StoreUnavailable, Unauthorized
from hooklatch.events.models import STATUSES, Event
from hooklatch.events.replay import request_replay
from hooklatch.events.serialize import (
    MAX_LIST_LIMIT,
    describe_event,
    describe_replay,
    event_history,
    list_events,
)
from hooklatch.runtime import current_runtime

bp = Blueprint("admin", __name__, url_prefix="/admin")
MAX_ID = 2**63 - 1  # events.id is a BIGINT


@bp.before_request
def require_token() -> None:
    expected = current_runtime().settings.admin_token
    if not expected:
        raise Unauthorized(
            "the admin API is off: set HOOKLATCH_ADMIN_TOKEN", reason="admin_disabled"
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("a valid 'Authorization: Bearer <admin token>' header is required")


@bp.post("/events/<event_id>/replay")
def replay(event_id: str) -> Any:
    runtime = current_runtime()
    number = _whole_number("the event id", event_id, high=MAX_ID)
    data = _json_object()
    requested_by = (_text(data, "requested_by") or "admin-api")[:200]
    reason = _text(data, "reason")
    try:
        with runtime.session_factory.begin() as session:
            row = request_replay(
                session,
                number,
                requested_by=f"{requested_by} ({request.remote_addr})",
                reason=reason,
                now=runtime.clock(),
            )
            body = describe_replay(row)
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    runtime.wake_dispatcher()
    return body, 202


@bp.get("/events")
def events() -> Any:
    runtime = current_runtime()
    unknown = sorted(set(request.args) - {"limit", "status"})
    if unknown:
        raise BadRequest(
            f"unknown query parameter {unknown[0]!r} (known: limit, status)",
            reason="bad_parameter",
        )
    limit = _whole_number("limit", request.args.get("limit", "50"), high=MAX_LIST_LIMIT)
    status = request.args.get("status")
    if status is not None and status not in STATUSES:
        raise BadRequest(f"status must be one of {', '.join(STATUSES)}", reason="bad_parameter")
    with runtime.session_factory() as session:
        rows = list_events(session, status=status, limit=limit)
        return {"events": [describe_event(e) for e in rows]}


@bp.get("/events/<event_id>")
def event(event_id: str) -> Any:
    number = _whole_number("the event id", event_id, high=MAX_ID)
    with current_runtime().session_factory() as session:
        row = session.get(Event, number)
        if row is None:
            raise NotFound(f"no event {number}")
        return event_history(session, row)


def _whole_number(name: str, text: str, *, high: int) -> int:
    """``text`` as a number from 1 to ``high``, written in ASCII digits; 400 otherwise
    (a negative limit is an error on PostgreSQL and every row on SQLite, an id past
    BIGINT an error on both)."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
        number = 0
    else:
        number = int(text)
    if not 1 <= number <= high:
        raise BadRequest(f"{name} must be a whole number from 1 to {high}", reason="bad_parameter")
    return number


def _json_object() -> dict[str, Any]:
    """The request's JSON object; none (an empty body) is an empty one."""
    body = request.get_data(cache=False)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past what json parses
        data = None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object", reason="malformed_body")
    return data


def _text(data: dict[str, Any], name: str) -> str | None:
    """A text field of the body, as the database can store it: no NUL character and no
    lone surrogate ("\\ud800" is valid JSON, not UTF-8)."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or "\x00" in value or not _encodes(value):
        raise BadRequest(f"{name} must be text (no NUL character)", reason="bad_parameter")
    return value


def _encodes(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True
