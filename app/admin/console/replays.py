"""Bulk replay in the console: the current filter's dry run, a confirmation with a reason,
the bulk replay's progress (the page refreshes itself), and cancelling it."""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.display import counted
from hooklatch.events.browse import EventFilter
from hooklatch.events.bulk_replays import Progress, watermark_of
from hooklatch.runtime import current_runtime
from hooklatch.services.replays import (
    cancel_bulk_replay,
    plan_bulk_replay,
    recent_bulk_replays,
    show_bulk_replay,
    start_bulk_replay,
)

FILTER_FIELDS = ("status", "provider", "endpoint", "type", "external_id", "since", "until")
# A replay's statuses, in the order the counts and the bar show them (``stale``: an older
# state run again, which its handler declined to apply).
SHOWN_ALWAYS = ("succeeded", "failed", "cancelled")
SHOWN_WHEN_ANY = ("stale", "pending")


def fared(bulk_replay: Progress) -> dict[str, object]:
    """How a bulk replay has fared, as its page and the list show it: a badge that says
    when replays failed (``done, 3 failed``, never the plain green of a bulk replay whose
    every replay succeeded), the count of each replay status, and the bar's segments:
    replays by status, then skipped events, out of every event matched."""
    replays = bulk_replay["replays"]
    failed = replays.get("failed", 0)
    label, tone = bulk_replay["status"], bulk_replay["status"]
    if failed:
        label = f"{bulk_replay['status']}, {failed} failed"
        tone = "failed" if not replays.get("succeeded") else "partly"
    counts = [(s, replays.get(s, 0)) for s in SHOWN_ALWAYS]
    counts += [(s, replays[s]) for s in SHOWN_WHEN_ANY if replays.get(s)]
    segments, x = [], 0
    for part, n in [*counts, ("skipped", bulk_replay["skipped"])]:
        if n:
            segments.append({"part": part, "x": x, "width": n, "n": n})
            x += n
    return {
        "label": label,
        "tone": tone,
        "counts": counts,
        "segments": segments,
        "total": max(bulk_replay["matched"], x, 1),
    }


@bp.get("/replays")
def replays() -> ResponseReturnValue:
    shown = recent_bulk_replays(current_runtime())
    return render_template("console/replays.html", bulk_replays=[(b, fared(b)) for b in shown])


@bp.get("/replays/new")
def plan_replay() -> ResponseReturnValue:
    """The dry run of the filter given: how many events, the oldest of them, and the form
    that starts the bulk replay. Nothing changes until that form is sent."""
    runtime = current_runtime()
    values = {k: request.args.get(k, "") for k in FILTER_FIELDS}
    chosen = EventFilter.parse(values, now=runtime.clock())
    if chosen.is_empty():
        flash("Choose events first: a bulk replay replays what a filter matches.", "error")
        return redirect(url_for("console.events"))
    return render_template("console/replay_plan.html", plan=plan_bulk_replay(runtime, chosen))


@bp.post("/replays")
def start_replay() -> ResponseReturnValue:
    runtime = current_runtime()
    values = {k: request.form.get(k, "") for k in FILTER_FIELDS}
    started = start_bulk_replay(
        runtime,
        EventFilter.parse(values, now=runtime.clock()),
        actor=actor(),
        reason=request.form.get("reason", ""),
        watermark=watermark_of(request.form.get("watermark")),
    )
    flash(f"Bulk replay {started['id']} started.", "ok")
    return redirect(url_for("console.bulk_replay", batch_id=started["id"]))


@bp.get("/replays/<int:batch_id>")
def bulk_replay(batch_id: int) -> ResponseReturnValue:
    shown = show_bulk_replay(current_runtime(), batch_id)
    return render_template("console/bulk_replay.html", bulk_replay=shown, fared=fared(shown))


@bp.post("/replays/<int:batch_id>/cancel")
def cancel_replay(batch_id: int) -> ResponseReturnValue:
    cancelled = cancel_bulk_replay(current_runtime(), batch_id, actor=actor())["replays_cancelled"]
    flash(
        f"Bulk replay {batch_id} cancelled: events not reached are not replayed, and "
        f"{counted(cancelled, 'replay')} asked for and not started "
        f"{'was' if cancelled == 1 else 'were'} cancelled "
        "(a replay already running finishes).",
        "ok",
    )
    return redirect(url_for("console.bulk_replay", batch_id=batch_id))
