"""Who may use the console, and the protections every console response carries."""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import timedelta

from flask import (
    Flask,
    Response,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask import session as cookie
from flask.typing import ResponseReturnValue
from flask_wtf.csrf import CSRFError, CSRFProtect
from werkzeug.exceptions import HTTPException

from hooklatch.admin.console.blueprint import bp
from hooklatch.errors import HooklatchError, http_error_response
from hooklatch.operations import access
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
    """A session for ``name`` if ``token`` is the admin token: a row on the server, and
    its token in the cookie. Raises ``TooManyAttempts`` while the address is locked out
    (the admin API's check: failures count against the address)."""
    runtime = current_runtime()
    expected = runtime.settings.admin_token
    guard = access.current_guard()
    if not expected or not guard.check(token, [expected], address=access.request_address()):
        return False
    with runtime.session_factory.begin() as session:
        value = access.open_session(
            session,
            name=_display_name(name),
            now=runtime.clock(),
            lifetime=timedelta(hours=runtime.settings.admin_session_hours),
        )
    cookie.clear()  # nothing of an earlier session carries over (its CSRF token included)
    cookie.permanent = True
    cookie[SESSION_KEY] = {"token": value}
    return True


def _display_name(given: str) -> str:
    """The name given at sign-in as the audit log shows it: printable characters only (a
    NUL is no text the database stores), at most NAME_LENGTH of them."""
    return "".join(c for c in given if c.isprintable()).strip()[:NAME_LENGTH] or "admin"


def sign_out() -> None:
    """End the session on the server: a copy of its cookie opens nothing afterwards."""
    token = _cookie_token()
    if token is not None:
        runtime = current_runtime()
        with runtime.session_factory.begin() as session:
            access.close_session(session, token)
    cookie.clear()


@bp.before_request
def _guard() -> ResponseReturnValue | None:
    settings = current_runtime().settings
    if not enabled(settings):
        return render_template("console/off.html"), 404
    if request.endpoint in OPEN_VIEWS:
        return None
    user = _proxy_user(settings) or _session_user()
    if not user:
        return redirect(url_for("console.login", next=request.full_path))
    g.console_user = user
    if request.method == "POST":
        csrf.protect()
    return None


def _session_user() -> str | None:
    """The signed-in name while the cookie's session is on the server, unexpired: its
    expiry is set at sign-in (HOOKLATCH_ADMIN_SESSION_HOURS), and using the console does
    not extend it."""
    token = _cookie_token()
    if token is None:
        return None
    runtime = current_runtime()
    with runtime.session_factory() as session:
        name = access.session_name(session, token, now=runtime.clock())
    if name is None:
        cookie.clear()  # signed out, expired, or never valid: the browser forgets it
    return name


def _cookie_token() -> str | None:
    data = cookie.get(SESSION_KEY)
    token = data.get("token") if isinstance(data, dict) else None
    return token if isinstance(token, str) else None


def _proxy_user(settings: Settings) -> str | None:
    """The name a trusted reverse proxy (oauth2-proxy) put in its header, or None."""
    header = settings.admin_proxy_header
    if not header or not access.within(request.remote_addr, settings.admin_proxy_ips):
        return None
    name = request.headers.get(header, "").strip()
    return name[:NAME_LENGTH] or None


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
def _csrf_refused(exc: CSRFError) -> ResponseReturnValue:
    log.warning("console form refused: %s", exc.description)
    message = "This form was not sent by this console, or it expired: reload the page."
    return render_template("console/error.html", message=message, status=400), 400


@bp.errorhandler(HooklatchError)
def _refused(exc: HooklatchError) -> ResponseReturnValue:
    return render_template("console/error.html", message=exc.message, status=exc.status_code), (
        exc.status_code
    )


@bp.errorhandler(404)
def _not_found(exc: Exception) -> ResponseReturnValue:
    return render_template("console/error.html", message="Nothing here.", status=404), 404


@bp.app_errorhandler(404)
def _no_such_page(exc: HTTPException) -> ResponseReturnValue:
    """A URL under the console's that is none of its pages gets the console's page (no
    route matched, so the blueprint's own handler is not asked); any other, the JSON
    answer of every other route."""
    prefix = bp.url_prefix or ""
    if request.path == prefix or request.path.startswith(prefix + "/"):
        return _not_found(exc)
    return http_error_response(exc)
