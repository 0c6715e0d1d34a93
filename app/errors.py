"""The exceptions a request can end in; each carries an HTTP status and a machine reason."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from werkzeug.datastructures import MultiDict
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Response

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment
    from flask import Flask
    from flask.typing import ResponseReturnValue

log = logging.getLogger(__name__)
# What a caller is told when the server's own set-up (plugins, keys) stops a delivery.
UNAVAILABLE = "this endpoint cannot take deliveries right now; nothing was stored. Retry later."
NUL = "\x00"
# What psycopg2 says of a NUL in a parameter (a ValueError).
NUL_REFUSED = "cannot contain NUL (0x00) characters"
# The bodies whose fields Flask reads as a form: the console's posts.
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")
NO_FIELDS: MultiDict[str, str] = MultiDict()


class HooklatchError(Exception):
    status_code = 500
    reason = "internal_error"
    headers: dict[str, str] = {}
    # Set where the message is about the server's own set-up: the response says this
    # instead, and the message goes to the log.
    public_message: str | None = None

    def __init__(self, message: str = "", *, reason: str | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.reason)
        if reason is not None:
            self.reason = reason

    @property
    def message(self) -> str:
        return str(self)


class NotFound(HooklatchError):
    """No such resource."""

    status_code = 404
    reason = "not_found"


class Unauthorized(HooklatchError):
    """Missing or wrong credentials."""

    status_code = 401
    reason = "unauthorized"


class MethodNotAllowed(HooklatchError):
    """This endpoint does not answer that method."""

    status_code = 405
    reason = "method_not_allowed"


class BadRequest(HooklatchError):
    """The request cannot be processed as sent."""

    status_code = 400
    reason = "bad_request"


class Conflict(HooklatchError):
    """The request cannot be carried out on the resource as it stands."""

    status_code = 409
    reason = "conflict"


class UnstorableText(BadRequest):
    """The request holds a NUL character or a lone surrogate, which cannot be stored."""

    reason = "bad_parameter"


class PayloadPruned(HooklatchError):
    """The event's body and headers were deleted by retention: it cannot run again."""

    status_code = 409
    reason = "payload_pruned"


class ReplayRefused(HooklatchError):
    """The event's handlers are about to run anyway: a replay now would run them twice."""

    status_code = 409
    reason = "replay_refused"


class TooManyAttempts(HooklatchError):
    """Too many failed admin-token attempts from this address: refused for a while."""

    status_code = 429
    reason = "too_many_attempts"

    def __init__(self, message: str = "", *, retry_after: int) -> None:
        super().__init__(message)
        self.headers = {"Retry-After": str(retry_after)}


class VerificationError(HooklatchError):
    """The request's signature or timestamp did not verify."""

    status_code = 401
    reason = "bad_signature"

    def __init__(
        self,
        message: str = "",
        *,
        reason: str | None = None,
        facts: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message, reason=reason)
        # Safe facts for the refusal log (parsed scheme, timestamp skew...): never a secret.
        self.facts = dict(facts or {})


class Forbidden(VerificationError):
    """The request is understood and refused: a handshake's token does not match."""

    status_code = 403
    reason = "forbidden"


class MalformedRequest(VerificationError):
    """A header or the body is not in the provider's format."""

    status_code = 400
    reason = "malformed"


class BodyTooLarge(HooklatchError):
    """The body is larger than HOOKLATCH_MAX_BODY_BYTES."""

    status_code = 413
    reason = "body_too_large"


class StoreUnavailable(HooklatchError):
    """The database did not answer; nothing was stored. Retry later."""

    status_code = 503
    reason = "store_unavailable"
    headers = {"Retry-After": "5"}


class SchemaNotCurrent(HooklatchError):
    """The database schema is older than this version: run `hooklatch db upgrade`."""

    status_code = 503
    reason = "schema_not_current"
    headers = {"Retry-After": "30"}


class ProviderUnavailable(HooklatchError):
    """The endpoint's provider plugin is not installed here; nothing was stored. Retry later."""

    status_code = 503
    reason = "provider_unavailable"
    headers = {"Retry-After": "30"}
    public_message = UNAVAILABLE


class SecretUnavailable(HooklatchError):
    """An endpoint secret cannot be decrypted with HOOKLATCH_SECRET_KEYS; nothing was stored."""

    status_code = 503
    reason = "secret_unavailable"
    headers = {"Retry-After": "30"}
    public_message = UNAVAILABLE


class ProviderAPIFailed(HooklatchError):
    """The provider's API refused or failed a call hooklatch made for an endpoint
    (registering its URL, reading its webhook): the reason is the API's, prefixed
    ``provider_`` (provider_unauthorized, provider_rate_limited, ...)."""

    status_code = 502
    reason = "provider_api_failed"


def json_bytes(body: object) -> bytes:
    """``body`` as JSON, written as Flask's ``jsonify`` writes it."""
    return (json.dumps(body, separators=(",", ":")) + "\n").encode()


def json_response(
    body: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """A JSON answer (``json_bytes``)."""
    return Response(
        json_bytes(body), status=status, headers=dict(headers or {}), mimetype="application/json"
    )


class JsonAnswer:
    """The answer ``json_response`` gives, as a bare WSGI application: the public route
    (hooklatch.ingest.views) answers with it. Building and calling a werkzeug Response
    was a fifth of a refusal's CPU in process, under a flood of bad signatures."""

    __slots__ = ("body", "headers", "status", "status_code")

    def __init__(
        self, body: object, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        self.body = json_bytes(body)
        self.status_code = status
        self.status = f"{status} {HTTP_STATUS_CODES.get(status, 'unknown').upper()}"
        self.headers = [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(self.body))),
            *(headers or {}).items(),
        ]

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        start_response(self.status, self.headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [self.body]


def error_json(
    exc: HooklatchError, method: str, path: str
) -> tuple[dict[str, str], int, Mapping[str, str]]:
    """``{"error": reason, "message": ...}``, the error's status and headers. Where the
    message is about the server's own set-up, it goes to the log instead."""
    message = exc.message
    if exc.public_message is not None:
        log.error(
            "%s %s answered %d %s: %s",
            method,
            path,
            exc.status_code,
            exc.reason,
            exc.message,
            extra={"reason": exc.reason},
        )
        message = exc.public_message
    return {"error": exc.reason, "message": message}, exc.status_code, exc.headers


def http_error_json(exc: HTTPException) -> tuple[dict[str, Any], int, Mapping[str, str]]:
    reason = HTTP_REASONS.get(exc.code or 500, "http_error")
    return {"error": reason, "message": exc.description}, exc.code or 500, {}


def error_response(exc: HooklatchError, method: str, path: str) -> Response:
    return json_response(*error_json(exc, method, path))


def http_error_response(exc: HTTPException) -> Response:
    return json_response(*http_error_json(exc))


def storable(text: str) -> bool:
    """Whether PostgreSQL can hold ``text``: no NUL character, and UTF-8 (JSON can
    escape a lone surrogate, which is not)."""
    if NUL in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def unstorable(exc: BaseException) -> bool:
    """Whether ``exc`` is the database driver refusing text PostgreSQL cannot hold: a NUL
    character (psycopg2 raises ValueError) or a lone surrogate (not UTF-8)."""
    if isinstance(exc, UnicodeEncodeError):
        return exc.reason == "surrogates not allowed"
    return isinstance(exc, ValueError) and NUL_REFUSED in str(exc)


def register_error_handlers(app: Flask) -> None:
    """The JSON answers of the exception tree, and a 400 where text the database cannot
    hold reached it (``refuse_nul`` stops it first; this keeps any route it misses from
    answering 500 with a traceback for something a sender chose)."""
    from flask import current_app, request

    @app.errorhandler(HooklatchError)
    def _render(exc: HooklatchError) -> Response:
        return error_response(exc, request.method, request.path)

    @app.errorhandler(HTTPException)
    def _render_http(exc: HTTPException) -> Response:
        return http_error_response(exc)

    @app.errorhandler(ValueError)
    def _unstorable(exc: ValueError) -> ResponseReturnValue:
        if not unstorable(exc):
            raise exc
        log.warning("%s: text the database cannot hold reached it, answered 400", request.endpoint)
        # Answered as the route's own errors are (the console's as a page).
        return current_app.handle_user_exception(UnstorableText())


def refuse_nul(app: Flask) -> None:
    """Before any view: a NUL character in the path, a query parameter or a form field is
    400 ``bad_parameter``. PostgreSQL cannot hold one, and its driver refuses it with an
    exception that every route would otherwise answer 500 with a traceback. It is the one
    character to look for: Werkzeug reads invalid UTF-8 in the path as U+FFFD, and keeps
    its percent escapes (``%FF``) in the query string and form fields, so no lone
    surrogate comes from these."""
    from flask import request

    @app.before_request
    def _refuse_nul() -> None:
        if NUL in request.path:
            raise BadRequest("the path holds a NUL character", reason="bad_parameter")
        for where, fields in (("query parameter", request.args), ("form field", _form())):
            for name, value in fields.items(multi=True):
                if NUL in name or NUL in value:
                    raise BadRequest(
                        f"the {where} {name[:40]!r} holds a NUL character", reason="bad_parameter"
                    )

    def _form() -> MultiDict[str, str]:
        """The form fields of a form post; nothing for other bodies (the API's JSON is its
        views' to read)."""
        if request.mimetype in FORM_TYPES:
            return request.form
        return NO_FIELDS


HTTP_REASONS = {
    404: "not_found",
    405: "method_not_allowed",
    413: BodyTooLarge.reason,
    400: "bad_request",
}
