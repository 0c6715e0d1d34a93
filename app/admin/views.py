"""The admin API: bearer-token protected; replay is explicit and audited."""

from __future__ import annotations

import hmac
from typing import Any

from flask import Blueprint, request
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.errors import BadRequest, NotFound, StoreUnavailable, Unauthorized
from hooklatch.events.models import Event
from hooklatch.events.replay import request_replay
from hooklatch.events.serialize import describe_event, describe_replay, event_history, list_events
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
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), expected.encode()):
        raise Unauthorized("a valid 'Authorization: Bearer <admin token>' header is required")


@bp.post("/events/<int:event_id>/replay")
def replay(event_id: int) -> Any:
    runtime = current_runtime()
    data = request.get_json(force=True, silent=True) if request.content_length else {}
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object", reason="malformed_body")
    requested_by = str(data.get("requested_by") or "admin-api")[:200]
    reason = data.get("reason")
    try:
        with runtime.session_factory.begin() as session:
            row = request_replay(
                session,
                event_id,
                requested_by=f"{requested_by} ({request.remote_addr})",
                reason=str(reason) if reason is not None else None,
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
    limit = min(request.args.get("limit", 50, type=int) or 50, 500)
    with runtime.session_factory() as session:
        rows = list_events(session, status=request.args.get("status"), limit=limit)
        return {"events": [describe_event(e) for e in rows]}


@bp.get("/events/<int:event_id>")
def event(event_id: int) -> Any:
    with current_runtime().session_factory() as session:
        row = session.get(Event, event_id)
        if row is None:
            raise NotFound(f"no event {event_id}")
        return event_history(session, row)
