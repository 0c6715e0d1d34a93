"""Blocked ordering keys in the console: each with the event holding it, why, since when
and how many events wait behind it; releasing a parked one, with a reason."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy import select

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.display import visible
from hooklatch.endpoints.models import Endpoint
from hooklatch.errors import NotFound
from hooklatch.events.models import DEAD, Event
from hooklatch.ordering.service import blocked_page
from hooklatch.runtime import current_runtime
from hooklatch.services import ordering

SHOWN = 200


@bp.get("/keys")
def keys() -> ResponseReturnValue:
    runtime = current_runtime()
    with runtime.session_factory() as session:
        found, total = blocked_page(session, limit=SHOWN)
        names = {i: name for i, name in session.execute(select(Endpoint.id, Endpoint.name))}
        # A parked key is held by a dead event; a failing one by its pending first event.
        dead = set(
            session.scalars(
                select(Event.id).where(
                    Event.id.in_([b.event_id for b in found]), Event.status == DEAD
                )
            )
        )
    rows = [
        {"key": b, "endpoint_name": names.get(b.endpoint_id), "parked": b.event_id in dead}
        for b in found
    ]
    return render_template("console/keys.html", rows=rows, total=total)


@bp.post("/endpoints/<endpoint_id>/keys/release")
def release_parked_key(endpoint_id: str) -> ResponseReturnValue:
    """The key is a form field, not part of the URL: keys hold slashes (orders/4501)."""
    key = request.form.get("key", "")
    reason = request.form.get("reason", "").strip()
    if not reason:
        flash("Releasing a key needs a reason.", "error")
        return redirect(url_for("console.keys"))
    if "\x00" in key:  # no stored key holds one, and PostgreSQL refuses it in a query
        raise NotFound(f"key {key!r} of endpoint {endpoint_id} is not parked", reason="not_parked")
    runtime = current_runtime()
    released = ordering.release_parked_key(runtime, endpoint_id, key, actor=actor(), reason=reason)
    flash(
        f"Key {visible(key)} released: its next event runs now. "
        f"Event {released['dead_event']} stays dead (replay it to run it again).",
        "ok",
    )
    return redirect(url_for("console.keys"))
