"""Who may use the console, and the protections every console response carries."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import time
from datetime import timedelta
from typing import Any

from flask import (
    Flask,
    Response,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_wtf.csrf import CSRFError, CSRFProtect

from hooklatch.admin.console.blueprint import bp
from hooklatch.errors import HooklatchError
from hooklatch.runtime import current_runtime
from hooklatch.settings import Settings

log = logging.getLogger(__name__)

csrf = CSRFProtect()
SESSION_KEY = "console"
NAME_LENGTH = 100
# No script or style but the console's own files; no frames, plugins, or form posts
# elsewhere. Charts are SVG drawn on the server.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
OPEN_VIEWS = {"console.login", "console.static"}
FAILED_SIGN_IN_DELAY = 1.0


def enabled(settings: Settings) -> bool:
    return bool(settings.admin_token or settings.admin_proxy_header)


def session_secret(settings: Settings) -> bytes:
    """The key that signs console session cookies, derived from the first encryption key
    and the admin token: every web process derives the same one, and changing either
    ends every session."""
    material = hashlib.sha256((settings.admin_token or "").encode()).digest()
    key = (settings.secret_keys[0] if settings.secret_keys else "").encode()
    return hmac.new(key, b"hooklatch console session\0" + material, hashlib.sha256).digest()


def configure(app: Flask) -> None:
    settings = current_settings(app)
    app.config.update(
        SECRET_KEY=session_secret(settings),
        SESSION_COOKIE_NAME="hooklatch_console",
        SESSION_COOKIE_PATH="/admin",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_SECURE=settings.public_url.startswith("https://"),
        PERMANENT_SESSION_LIFETIME=timedelta(hours=settings.admin_session_hours),
        # The cookie's expiry is set at sign-in and never pushed back by later requests.
        SESSION_REFRESH_EACH_REQUEST=False,
        # Only the console's forms are checked (below): the API takes a bearer token,
        # and the public route is no Flask view at all.
        WTF_CSRF_CHECK_DEFAULT=False,
    )
    csrf.init_app(app)


def current_settings(app: Flask) -> Settings:
    runtime = app.extensions["hooklatch"]
    settings: Settings = runtime.settings
    return settings


def actor() -> str:
    """Who is signed in, for the audit log."""
    name: str = g.console_user
    return f"{name} (console)"


def sign_in(name: str, token: str) -> bool:
    settings = current_runtime().settings
    expected = settings.admin_token
    if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
        log.warning("console sign-in refused from %s", request.remote_addr)
        time.sleep(FAILED_SIGN_IN_DELAY)  # a guesser gets one try a second per connection
        return False
    session.clear()
    session.permanent = True
    session[SESSION_KEY] = {"name": name.strip()[:NAME_LENGTH] or "admin", "at": time.time()}
    return True


def sign_out() -> None:
    session.clear()


@bp.before_request
def _guard() -> Any:
    settings = current_runtime().settings
    if not enabled(settings):
        return render_template("console/off.html"), 404
    if request.endpoint in OPEN_VIEWS:
        return None
    user = _proxy_user(settings) or _session_user(settings)
    if not user:
        return redirect(url_for("console.login", next=request.full_path))
    g.console_user = user
    if request.method == "POST":
        csrf.protect()
    return None


def _session_user(settings: Settings) -> str | None:
    """The signed-in name while the sign-in is younger than HOOKLATCH_ADMIN_SESSION_HOURS:
    an absolute age, which using the console does not extend."""
    data = session.get(SESSION_KEY) or {}
    signed_in_at = data.get("at")
    if not isinstance(signed_in_at, (int, float)):
        return None
    if time.time() - signed_in_at > settings.admin_session_hours * 3600:
        session.clear()
        return None
    name = data.get("name")
    return name if isinstance(name, str) else None


def _proxy_user(settings: Settings) -> str | None:
    """The name a trusted reverse proxy (oauth2-proxy) put in its header, or None."""
    header = settings.admin_proxy_header
    if not header or not _trusted(request.remote_addr, settings.admin_proxy_ips):
        return None
    name = request.headers.get(header, "").strip()
    return name[:NAME_LENGTH] or None


def _trusted(address: str | None, networks: tuple[str, ...]) -> bool:
    if not address:
        return False
    try:
        peer = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(peer in ipaddress.ip_network(n, strict=False) for n in networks)


@bp.after_request
def _protect(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    # Same-origin: Flask-WTF checks the Referer of forms posted over https.
    response.headers["Referrer-Policy"] = "same-origin"
    if request.endpoint != "console.static":
        response.headers["Cache-Control"] = "no-store"
    return response


@bp.errorhandler(CSRFError)
def _csrf_refused(exc: CSRFError) -> Any:
    log.warning("console form refused: %s", exc.description)
    message = "This form was not sent by this console, or it expired: reload the page."
    return render_template("console/error.html", message=message, status=400), 400


@bp.errorhandler(HooklatchError)
def _refused(exc: HooklatchError) -> Any:
    return render_template("console/error.html", message=exc.message, status=exc.status_code), (
        exc.status_code
    )


@bp.errorhandler(404)
def _not_found(exc: Exception) -> Any:
    return render_template("console/error.html", message="Nothing here.", status=404), 404
