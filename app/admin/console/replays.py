"""Bulk replay in the console: the current filter's dry run, a confirmation with a reason,
the batch's progress (the page refreshes itself), and cancelling it."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, render_template, request, url_for

from hooklatch.admin.console.auth import actor
from hooklatch.admin.console.blueprint import bp
from hooklatch.display import counted
from hooklatch.events import batches
from hooklatch.events.browse import EventFilter
from hooklatch.events.serialize import describe_event
from hooklatch.runtime import current_runtime

FILTER_FIELDS = ("status", "provider", "endpoint", "type", "external_id", "since", "until")
# A replay's statuses, in the order the counts and the bar show them (``stale``: an older
# state run again, which its handler declined to apply).
SHOWN_ALWAYS = ("succeeded", "failed", "cancelled")
SHOWN_WHEN_ANY = ("stale", "pending")


def fared(batch: dict[str, Any]) -> dict[str, Any]:
    """How a batch (``batches.describe``) has fared, as its page and the list show it: a
    badge that says when replays failed (``done, 3 failed``, never the plain green of a
    batch whose every replay succeeded), the count of each replay status, and the bar's
    segments: replays by status, then skipped events, out of every event matched."""
    replays = batch["replays"]
    failed = replays.get("failed", 0)
    label, tone = batch["status"], batch["status"]
    if failed:
        label = f"{batch['status']}, {failed} failed"
        tone = "failed" if not replays.get("succeeded") else "partly"
    counts = [(s, replays.get(s, 0)) for s in SHOWN_ALWAYS]
    counts += [(s, replays[s]) for s in SHOWN_WHEN_ANY if replays.get(s)]
    segments, x = [], 0
    for part, n in [*counts, ("skipped", batch["skipped"])]:
        if n:
            segments.append({"part": part, "x": x, "width": n, "n": n})
            x += n
    return {
        "label": label,
        "tone": tone,
        "counts": counts,
        "segments": segments,
        "total": max(batch["matched"], x, 1),
    }


@bp.get("/replays")
def replays() -> Any:
    with current_runtime().session_factory() as session:
        shown = [batches.describe(session, b) for b in batches.recent(session)]
    return render_template("console/replays.html", batches=[(b, fared(b)) for b in shown])


@bp.get("/replays/new")
def plan_replay() -> Any:
    """The dry run of the filter given: how many events, the oldest of them, and the form
    that starts the batch. Nothing changes until that form is sent."""
    runtime = current_runtime()
    values = {k: request.args.get(k, "") for k in FILTER_FIELDS}
    chosen = EventFilter.parse(values, now=runtime.clock())
    if chosen.is_empty():
        flash("Choose events first: a bulk replay replays what a filter matches.", "error")
        return redirect(url_for("console.events"))
    with runtime.session_factory() as session:
        found = batches.plan(session, chosen, cap=runtime.settings.replay_batch_max)
        sample = [describe_event(e) for e in found.sample]
    return render_template(
        "console/replay_plan.html",
        plan=found,
        sample=sample,
        # The times as they were resolved now ("2h" ago stays the same two hours).
        fields=chosen.as_dict(),
        rate=runtime.settings.replay_batch_rate,
    )


@bp.post("/replays")
def start_replay() -> Any:
    runtime = current_runtime()
    values = {k: request.form.get(k, "") for k in FILTER_FIELDS}
    now = runtime.clock()
    chosen = EventFilter.parse(values, now=now)
    with runtime.session_factory.begin() as session:
        batch = batches.start(
            session,
            chosen,
            actor=actor(),
            reason=request.form.get("reason", ""),
            cap=runtime.settings.replay_batch_max,
            rate=runtime.settings.replay_batch_rate,
            now=now,
            watermark=batches.watermark_of(request.form.get("watermark")),
        )
        batch_id = batch.id
    runtime.wake_dispatcher()
    flash(f"Bulk replay {batch_id} started.", "ok")
    return redirect(url_for("console.replay_batch", batch_id=batch_id))


@bp.get("/replays/<int:batch_id>")
def replay_batch(batch_id: int) -> Any:
    with current_runtime().session_factory() as session:
        shown = batches.describe(session, batches.get(session, batch_id))
    return render_template("console/replay_batch.html", batch=shown, fared=fared(shown))


@bp.post("/replays/<int:batch_id>/cancel")
def cancel_replay(batch_id: int) -> Any:
    runtime = current_runtime()
    with runtime.session_factory.begin() as session:
        cancelled = batches.cancel(session, batch_id, actor=actor(), now=runtime.clock())
    flash(
        f"Bulk replay {batch_id} cancelled: events not reached are not replayed, and "
        f"{counted(cancelled.replays, 'replay')} asked for and not started "
        f"{'was' if cancelled.replays == 1 else 'were'} cancelled "
        "(a replay already running finishes).",
        "ok",
    )
    return redirect(url_for("console.replay_batch", batch_id=batch_id))
