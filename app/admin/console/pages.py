"""Signing in, the overview, events and one event, replaying it, and the audit log."""

from __future__ import annotations

import json
import shlex
from datetime import datetime
from typing import Any
from urllib.parse import unquote, urlsplit

from flask import Response, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from sqlalchemy import select

from hooklatch import audit
from hooklatch.admin.console.auth import actor, sign_in, sign_out
from hooklatch.admin.console.blueprint import bp
from hooklatch.display import visible, visible_json
from hooklatch.endpoints.models import Endpoint
from hooklatch.errors import BadRequest, ReplayRefused, TooManyAttempts
from hooklatch.events import activity
from hooklatch.events.browse import EventFilter, page
from hooklatch.events.models import STATUSES, Event
from hooklatch.events.serialize import event_history
from hooklatch.runtime import current_runtime
from hooklatch.services.replays import replay_event

STORED = ("accepted", "duplicate")
# How the accepted events ended (with those pending, their sum is ``accepted``), and
# failed attempts.
HANDLED = (*activity.ENDED, activity.FAILED)
# Headers curl writes itself, or that describe the connection rather than the delivery.
NOT_RESENT = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}
MAX_ID = 2**63 - 1
# Bytes a $'...' word of the curl command writes as themselves: printable ASCII, with the
# backslash and the quote escaped.
ANSI_C = {byte: chr(byte) for byte in range(0x20, 0x7F)} | {0x5C: "\\\\", 0x27: "\\'"}


@bp.route("/login", methods=["GET", "POST"])
def login() -> ResponseReturnValue:
    runtime = current_runtime()
    if not runtime.settings.admin_token:
        return render_template("console/login.html", token_sign_in=False), 200
    if request.method == "POST":
        from hooklatch.admin.console.auth import csrf

        csrf.protect()
        try:
            if sign_in(request.form.get("name", ""), request.form.get("token", "")):
                return redirect(_safe_next(request.args.get("next")))
        except TooManyAttempts as exc:
            flash(exc.message, "error")
            return render_template("console/login.html", token_sign_in=True), 429, exc.headers
        flash("That is not the admin token.", "error")
        return render_template("console/login.html", token_sign_in=True), 401
    return render_template("console/login.html", token_sign_in=True)


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    sign_out()
    return redirect(url_for("console.login"))


@bp.get("/")
def overview() -> ResponseReturnValue:
    runtime = current_runtime()
    now = runtime.clock()
    with runtime.session_factory() as session:
        endpoints = session.scalars(select(Endpoint).order_by(Endpoint.name)).all()
        seen = activity.overview(session, now=now)
        hours = activity.series(session, now=now)
        rows = [_overview_row(e, seen, now) for e in endpoints]
    return render_template("console/overview.html", rows=rows, chart=_chart(hours), now=now)


def _overview_row(endpoint: Endpoint, seen: dict[str, Any], now: datetime) -> dict[str, Any]:
    counts = seen["counts"].get(endpoint.id, {})
    waiting = seen["waiting"].get(endpoint.id, {})
    oldest = waiting.get("oldest_pending")
    refused = {
        outcome: n
        for outcome, n in sorted(counts.items())
        if outcome not in (*STORED, *HANDLED, "handshake")
    }
    return {
        "endpoint": endpoint,
        **{outcome: counts.get(outcome, 0) for outcome in (*STORED, *HANDLED)},
        "refused": refused,
        "pending": waiting.get("pending_recent", 0),
        "pending_now": waiting.get("pending", 0),
        "dead_now": waiting.get("dead", 0),
        "oldest_pending_seconds": (now - oldest).total_seconds() if oldest else None,
    }


def _chart(hours: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars for an SVG drawn in the template: deliveries stored, and failures, per hour."""
    width, height, gap = 24, 100, 4
    top = max([1, *(h["deliveries"] for h in hours), *(h["failures"] for h in hours)])
    bars = []
    for position, hour in enumerate(hours):
        stored = round(height * hour["deliveries"] / top)
        failed = round(height * hour["failures"] / top)
        x = position * (width + gap)
        bars.append(
            {
                "x": x,
                "stored_y": height - stored,
                "stored": stored,
                "failed_x": x + width // 2,
                "failed_y": height - failed,
                "failed": failed,
                "label": hour["hour"].strftime("%H:00"),
                "deliveries": hour["deliveries"],
                "failures": hour["failures"],
            }
        )
    return {"bars": bars, "width": len(hours) * (width + gap), "height": height, "top": top}


@bp.get("/events")
def events() -> ResponseReturnValue:
    runtime = current_runtime()
    args = {k: v for k, v in request.args.items() if k != "before"}
    chosen = EventFilter.parse(args, now=runtime.clock())
    before = id_or_none(request.args.get("before"))
    with runtime.session_factory() as session:
        rows, after = page(session, chosen, before=before)
        names = {i: name for i, name in session.execute(select(Endpoint.id, Endpoint.name))}
        providers = sorted(set(session.scalars(select(Endpoint.provider))))
    return render_template(
        "console/events.html",
        rows=rows,
        after=after,
        args=args,
        names=names,
        statuses=STATUSES,
        providers=providers,
        filtered=not chosen.is_empty(),
    )


@bp.get("/events/<int:event_id>")
def event(event_id: int) -> ResponseReturnValue:
    runtime = current_runtime()
    with runtime.session_factory() as session:
        row = session.get(Event, event_id)
        if row is None:
            abort(404)
        history = event_history(session, row)
        endpoint = session.get(Endpoint, row.endpoint_id)
        body, headers = row.body, dict(row.headers or {})
    return render_template(
        "console/event.html",
        event=history,
        endpoint=endpoint,
        body_text=_pretty(body),
        body_size=len(body) if body is not None else None,
        headers=sorted(headers.items()),
        curl=_curl(runtime.settings.public_url, row.endpoint_id, event_id, headers, body),
    )


@bp.get("/events/<int:event_id>/body")
def event_body(event_id: int) -> ResponseReturnValue:
    """The exact bytes as received, as a download (never rendered by the browser)."""
    with current_runtime().session_factory() as session:
        row = session.get(Event, event_id)
        if row is None or row.body is None:
            abort(404)
        body = row.body
    return Response(
        body,
        mimetype="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="event-{event_id}.body"'},
    )


@bp.post("/events/<int:event_id>/replay")
def replay(event_id: int) -> ResponseReturnValue:
    reason = request.form.get("reason", "").strip()
    if not reason:
        flash("A replay needs a reason.", "error")
        return redirect(url_for("console.event", event_id=event_id))
    try:
        replay_event(current_runtime(), event_id, actor=actor(), reason=reason)
    except (ReplayRefused, BadRequest) as exc:  # refused, or a reason too long
        flash(exc.message, "error")
        return redirect(url_for("console.event", event_id=event_id))
    flash("Replay requested: its attempt appears below once a worker has run it.", "ok")
    return redirect(url_for("console.event", event_id=event_id))


@bp.get("/audit")
def audit_log() -> ResponseReturnValue:
    before = id_or_none(request.args.get("before"))
    with current_runtime().session_factory() as session:
        entries = audit.recent(session, before=before, limit=50)
        shown = [audit.describe(e) for e in entries]
    after = shown[-1]["id"] if len(shown) == 50 else None
    return render_template("console/audit.html", entries=shown, after=after)


def _pretty(body: bytes | None) -> str | None:
    """The body as indented JSON when it is JSON, else as text when it decodes, else
    None (the download has the bytes); either way with its invisible characters escaped
    (hooklatch.display)."""
    if body is None:
        return None
    try:
        pretty = json.dumps(
            json.loads(body, object_pairs_hook=_unique), indent=2, ensure_ascii=False
        )
    except (ValueError, RecursionError):  # a key given twice too: shown as received
        pass
    else:
        return visible_json(pretty)
    try:
        return visible(body.decode(), keep="\n\t")
    except UnicodeDecodeError:
        return None


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: re-indented, ``{"amount": 1, "amount": 1000}``
    would show one of them, not what the sender sent."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError("a key given twice")
    return dict(pairs)


def _curl(
    public_url: str, endpoint_id: str, event_id: int, headers: dict[str, str], body: bytes | None
) -> str | None:
    """A curl command that sends the delivery again as received: its signature headers
    included, so it verifies again while the provider's timestamp tolerance allows."""
    if body is None:
        return None
    parts = ["curl", "-sS", "-X", "POST", _shell_word(f"{public_url}/hooks/{endpoint_id}".encode())]
    for name, value in sorted(headers.items()):
        if name not in NOT_RESENT:
            parts += ["-H", _shell_word(_received(f"{name}: {value}"))]
    text = _pasteable(body)
    if text is None:  # sent from the downloaded file, byte for byte
        parts += ["--data-binary", shlex.quote(f"@event-{event_id}.body")]
    else:  # --data-raw: a body that starts with @ is data, not a file of the operator's
        parts += ["--data-raw", shlex.quote(text)]
    return " ".join(parts)


def _received(header: str) -> bytes:
    """A stored header as the bytes received: WSGI hands headers over decoded as Latin-1,
    one character per byte (UTF-8 for text that cannot be, which no request gives)."""
    try:
        return header.encode("latin-1")
    except UnicodeEncodeError:
        return header.encode()


def _shell_word(data: bytes) -> str:
    """One bash (or zsh, ksh) word that gives back exactly ``data`` and shows only printable ASCII:
    quoted as it is when it is printable ASCII, else in bash's ``$'...'`` with every other
    byte written ``\\xHH``. Shown as text, a C1 control (U+0080 to U+009F) reached the
    terminal of whoever pasted it, and a byte over 0x7F came back in the terminal's
    encoding instead of as received, which breaks a signature over a header."""
    if all(0x20 <= byte < 0x7F for byte in data):
        return shlex.quote(data.decode("ascii"))
    return "$'" + "".join(ANSI_C.get(byte) or f"\\x{byte:02x}" for byte in data) + "'"


def _pasteable(body: bytes) -> str | None:
    """The body as text that survives a copy and paste into a shell unchanged, and shows
    what it holds: UTF-8 whose every character is printable but newline and tab. A
    carriage return would become a newline (and break the signature), an escape sequence
    could end the terminal's bracketed paste and type the rest as keystrokes, and a
    format character (a right-to-left override) would show the command as another."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        return None
    if not all(c.isprintable() or c in "\n\t" for c in text):
        return None
    return text


def id_or_none(text: str | None) -> int | None:
    if not text or not text.isascii() or not text.isdigit() or len(text) > 19:
        return None
    number = int(text)
    return number if 1 <= number <= MAX_ID else None


def _safe_next(target: str | None) -> str:
    """Back where the sign-in was asked for, if that is a plain path of a console page:
    never elsewhere. A control character (a CR or LF, which Werkzeug refuses in a header:
    the redirect was a 500), a format or space character, a backslash (which browsers read
    as a slash) or a dot segment gives the start page instead."""
    default = url_for("console.overview")
    if not target or not target.isprintable() or " " in target or "\\" in target:
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/admin/console/"):
        return default
    if {".", ".."} & set(unquote(parts.path).split("/")):
        return default
    return target
