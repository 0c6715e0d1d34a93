"""Destinations in the console: each with its connection as every face shows it (never a
secret), filter, rate limit, forwards waiting and dead, what it delivered and its last
error; a page per destination with its dead forwards, newest first; pausing and resuming
it, and replaying its dead forwards after a dry run that says how many would go. Every
change goes through hooklatch.services.forwarding, which audits it."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.wrappers import Response

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.admin.console.pages import id_or_none
from hooklatch.display import counted
from hooklatch.errors import BadRequest
from hooklatch.forwarding.destinations import ReplaySet
from hooklatch.runtime import current_runtime
from hooklatch.services.forwarding import (
    dead_forwards,
    list_destinations,
    pause_destination,
    replay_forwards,
    show_destination,
)

# The dead forwards a destination's page lists at a time.
DEAD_PAGE = 50
DEAD_ONLY = ReplaySet()


def _back(destination_id: str) -> Response:
    return redirect(url_for("console.destination", destination_id=destination_id))


@bp.get("/destinations")
def destinations() -> ResponseReturnValue:
    return render_template("console/destinations.html", rows=list_destinations(current_runtime()))


@bp.get("/destinations/<destination_id>")
def destination(destination_id: str) -> ResponseReturnValue:
    runtime = current_runtime()
    shown = show_destination(runtime, destination_id)
    before = id_or_none(request.args.get("before"))
    dead, after = dead_forwards(runtime, destination_id, before=before, limit=DEAD_PAGE)
    return render_template(
        "console/destination.html", destination=shown, dead=dead, after=after, before=before
    )


@bp.post("/destinations/<destination_id>/paused")
def set_paused(destination_id: str) -> ResponseReturnValue:
    paused = request.form.get("paused") == "true"
    changed = pause_destination(current_runtime(), destination_id, paused=paused, actor=actor())
    if not changed["changed"]:
        flash(f"It was {'paused' if paused else 'sending'} already.", "ok")
    elif paused:
        flash("Paused: its forwards are recorded and wait; none is sent until it resumes.", "ok")
    else:
        flash("Resumed: its waiting forwards go, oldest first, under its rate limit.", "ok")
    return _back(destination_id)


@bp.get("/destinations/<destination_id>/replay")
def plan_dead_replay(destination_id: str) -> ResponseReturnValue:
    """The dry run: how many dead forwards would be sent again, and the form that sends
    them. Nothing changes until that form is sent."""
    runtime = current_runtime()
    plan = replay_forwards(
        runtime, destination_id, DEAD_ONLY, dry_run=True, actor=actor(), reason=None
    )
    return render_template(
        "console/destination_replay.html",
        destination=show_destination(runtime, destination_id),
        plan=plan,
    )


@bp.post("/destinations/<destination_id>/replay")
def replay_dead(destination_id: str) -> ResponseReturnValue:
    reason = request.form.get("reason", "").strip()
    if not reason:
        flash("A replay needs a reason.", "error")
        return redirect(url_for("console.plan_dead_replay", destination_id=destination_id))
    try:
        done = replay_forwards(
            current_runtime(),
            destination_id,
            DEAD_ONLY,
            dry_run=False,
            actor=actor(),
            reason=reason,
        )
    except BadRequest as exc:  # a reason too long
        flash(exc.message, "error")
        return redirect(url_for("console.plan_dead_replay", destination_id=destination_id))
    replayed = done["replayed"]
    sent = counted(replayed if isinstance(replayed, int) else 0, "dead forward")
    flash(f"{sent} sent again: they wait with the others, oldest first, under its limit.", "ok")
    return _back(destination_id)
