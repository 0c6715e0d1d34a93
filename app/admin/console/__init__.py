"""The admin console: server-rendered pages under /admin/console, served by the web
process. Sign-in with the admin token opens a session held on the server, whose token an
expiring cookie carries (sign-out ends it); failed sign-ins count towards the lockout the
admin API shares (hooklatch.operations.access). Behind a reverse proxy that
authenticates people, the name it sets in a header (trusted only from the proxy's
addresses) is used instead. Without either, the console is off, like the API.

Every form that changes something carries a CSRF token (Flask-WTF); every page sends a
strict Content-Security-Policy (no inline script or style) and refuses to be framed;
what came in a request (bodies, headers, event types and ids) is only ever rendered
through Jinja's autoescaping, and shown with its invisible characters escaped
(``visible``: hooklatch.display).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from flask import Flask, url_for
from markupsafe import Markup, escape

# Imported for the views and hooks they register on the blueprint.
from hooklatch.admin.console import (  # noqa: F401
    auth,
    destinations,
    endpoints,
    keys,
    pages,
    provider_side,
    replays,
)
from hooklatch.admin.console.blueprint import bp
from hooklatch.audit import REASON_MAX
from hooklatch.display import counted, shown_age, shown_time, utc_time, visible


@bp.app_template_global()
def with_query(view: str, params: Mapping[str, Any]) -> str:
    """A console URL with ``params`` as its query string. The filters' own names can
    collide with url_for's (``endpoint``), so they are never passed to it as keywords."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return url_for(view) + (f"?{query}" if query else "")


@bp.app_template_filter("visible")
def visible_filter(value: object, keep: str = "") -> str:
    """``{{ key|visible }}``: text someone else chose, its invisible characters escaped
    (hooklatch.display). Only where text is shown: a form field keeps the value as is."""
    return visible(str(value), keep=keep)


@bp.app_template_filter("when")
def when_filter(value: datetime | str | None, empty: str = "\N{EN DASH}") -> Markup:
    """``{{ event.received_at|when }}``: ``2026-11-26 12:37:29 UTC`` on one line, the
    exact value (microseconds and all) in its ``datetime`` and shown on hover."""
    if value is None or value == "":
        return escape(empty)
    exact = utc_time(value).isoformat()
    return Markup('<time datetime="{0}" title="{0}">{1}</time>').format(exact, shown_time(value))


@bp.app_template_filter("age")
def age_filter(seconds: float | None, empty: str = "\N{EN DASH}") -> str:
    """``{{ 1164.2|age }}``: ``19.4 min`` (hooklatch.display); ``empty`` for None."""
    return empty if seconds is None else shown_age(seconds)


@bp.app_template_filter("counted")
def counted_filter(number: int, noun: str, plural: str | None = None) -> str:
    """``{{ n|counted("event") }}``: ``1 event``, ``2 events`` (hooklatch.display)."""
    return counted(number, noun, plural)


@bp.context_processor
def _limits() -> dict[str, Any]:
    """Limits the forms state (``maxlength``) as the service functions enforce them."""
    return {"reason_max": REASON_MAX}


def init_app(app: Flask) -> None:
    auth.configure(app)
    app.register_blueprint(bp)
