"""POST /hooks/<endpoint-id>: look up, verify, record, answer.

The route is served beneath Flask (``IngestRoute`` wraps the app's WSGI callable): the
URL is public, and every request to it, a flood of bad signatures included, would
otherwise pay for Flask's request context, routing and error handlers, which it does
not use. Everything else goes on to Flask. Errors are answered as Flask's handlers
answer them (hooklatch.errors).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from psycopg2.errorcodes import FEATURE_NOT_SUPPORTED, INVALID_SQL_STATEMENT_NAME
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Request, Response

from hooklatch import metrics
from hooklatch.endpoints.service import ActiveEndpoint, active_endpoint, possible_id
from hooklatch.errors import (
    BodyTooLarge,
    HooklatchError,
    JsonAnswer,
    MethodNotAllowed,
    NotFound,
    StoreUnavailable,
    UnstorableText,
    VerificationError,
    error_json,
    http_error_json,
    unstorable,
)
from hooklatch.ingest.store import ACCEPTED, DUPLICATE, EndpointChanged, Recorded, record_events
from hooklatch.ingest.verify import (
    Arrival,
    count_refusal,
    provider_for,
    verified_by_cache,
    verify,
)
from hooklatch.logs import bind
from hooklatch.providers.base import Delivery
from hooklatch.runtime import Runtime

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger(__name__)
T = TypeVar("T")
PREFIX = "/hooks/"


class IngestRoute:
    """WSGI middleware: ``/hooks/<endpoint-id>`` answered here, any other path by ``app``."""

    def __init__(self, app: WSGIApplication, runtime: Runtime) -> None:
        self.app = app
        self.runtime = runtime

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        path: str = environ.get("PATH_INFO", "")
        endpoint_id = path[len(PREFIX) :]
        if not path.startswith(PREFIX) or not endpoint_id or "/" in endpoint_id:
            return self.app(environ, start_response)
        request = Request(environ)
        elapsed, seen = metrics.timer(), metrics.DeliveryTally()
        try:
            response = self.answer(request, endpoint_id, seen)
        except HooklatchError as exc:
            seen.outcome = exc.reason
            response = JsonAnswer(*error_json(exc, request.method, request.path))
        except HTTPException as exc:
            seen.outcome = "bad_request" if exc.code == 400 else f"http_{exc.code}"
            response = JsonAnswer(*http_error_json(exc))
        except Exception as exc:
            response = _internal_error(request, exc, seen)
        seen.count(endpoint_id, elapsed())
        if seen.provider is not None:  # an endpoint that exists: the overview counts it
            stored = seen.outcome in (ACCEPTED, DUPLICATE)
            self.runtime.activity.add(
                endpoint_id,
                seen.outcome,
                now=self.runtime.clock(),
                fingerprint=seen.fingerprint if stored else None,
            )
        return response(environ, start_response)

    def answer(
        self, request: Request, endpoint_id: str, seen: metrics.DeliveryTally
    ) -> WSGIApplication:
        if not possible_id(endpoint_id):
            raise NotFound("unknown or disabled endpoint", reason="unknown_endpoint")
        if request.method == "POST":
            return receive(self.runtime, request, endpoint_id, seen)
        if request.method in ("GET", "HEAD"):
            return challenge(self.runtime, request, endpoint_id, seen)
        refused = MethodNotAllowed(f"{request.method} is not answered here; deliveries are POSTed")
        refused.headers = {"Allow": "GET, HEAD, POST"}
        raise refused


def _internal_error(request: Request, exc: Exception, seen: metrics.DeliveryTally) -> JsonAnswer:
    """500 with the traceback in the log; but 400, in one line, where text the database
    cannot hold reached it: something a sender chose, which nothing here should pass on."""
    if unstorable(exc):
        log.warning("a delivery held text the database cannot hold, answered 400")
        refused = UnstorableText()
        seen.outcome = refused.reason
        return JsonAnswer(*error_json(refused, request.method, request.path))
    log.exception("%s %s answered 500", request.method, request.path)
    return JsonAnswer({"error": "internal_error", "message": "internal server error"}, 500)


def receive(
    runtime: Runtime, request: Request, endpoint_id: str, seen: metrics.DeliveryTally
) -> WSGIApplication:
    body = _read_body(request, runtime.settings.max_body_bytes)
    headers = request_headers(request.environ)
    url = _url(runtime, request)
    with bind(endpoint_id=endpoint_id):
        arrival = Arrival(endpoint_id, url, headers, body, seen)
        try:
            cached = verified_by_cache(runtime, arrival)
            outcome = _with_store(runtime, partial(_ingest, runtime, arrival, cached=cached))
        except VerificationError as exc:
            count_refusal(runtime, endpoint_id, exc, headers, body)
            raise
    if isinstance(outcome, Response):
        seen.outcome = metrics.HANDSHAKE
        return outcome
    accepted = any(item.status == ACCEPTED for item in outcome)
    seen.outcome = ACCEPTED if accepted else DUPLICATE
    seen.conflicts = sum(item.conflicts_with is not None for item in outcome)
    if accepted:
        runtime.wake_dispatcher()
    return JsonAnswer(
        {
            "status": ACCEPTED if accepted else DUPLICATE,
            "events": [item.as_json() for item in outcome],
        }
    )


def challenge(
    runtime: Runtime, request: Request, endpoint_id: str, seen: metrics.DeliveryTally
) -> Response:
    """An unsigned GET handshake (Meta's hub.challenge), if the provider has one."""
    headers = request_headers(request.environ)
    url = _url(runtime, request)
    with bind(endpoint_id=endpoint_id):

        def answer(connection: Connection) -> Response | None:
            endpoint = active_endpoint(connection, endpoint_id, box=runtime.box)
            seen.provider = endpoint.provider
            provider = provider_for(runtime, endpoint.provider)
            delivery = Delivery("GET", url, headers, b"", endpoint.options)
            response = provider.challenge(delivery, secrets=endpoint.secrets)
            if response is None:
                return None
            return Response(
                response.body, status=response.status, content_type=response.content_type
            )

        try:
            response = _with_store(runtime, answer)
        except VerificationError as exc:
            count_refusal(runtime, endpoint_id, exc, headers, b"")
            raise
    if response is None:
        refused = MethodNotAllowed("this endpoint takes POST deliveries only")
        refused.headers = {"Allow": "POST"}
        raise refused
    seen.outcome = metrics.HANDSHAKE
    return response


def request_headers(environ: WSGIEnvironment) -> dict[str, str]:
    """The request's headers by lower-case name, in werkzeug's order (``request.headers``),
    read from ``environ`` without building that object (a seventh of a refusal's CPU in
    process, under a flood of bad signatures)."""
    headers: dict[str, str] = {}
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            if key not in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                headers[key[5:].replace("_", "-").lower()] = value
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH") and value:
            headers[key.replace("_", "-").lower()] = value
    return headers


def _read_body(request: Request, limit: int) -> bytes:
    """The raw body; 413 when it is longer than ``limit`` bytes, however it is framed.

    A Content-Length over the limit is refused before anything is read. A body of unknown
    length (chunked) is read up to ``limit + 1`` bytes and refused if that byte arrives:
    Werkzeug's own limit stops at exactly the limit without looking further, so a longer
    body would be cut and then judged on its first bytes.
    """
    if request.content_length is not None and request.content_length > limit:
        raise BodyTooLarge()
    request.max_content_length = limit + 1
    stream, chunks, size = request.stream, [], 0
    while size <= limit:
        chunk = stream.read(limit + 1 - size)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise BodyTooLarge()
    return b"".join(chunks)


def _url(runtime: Runtime, request: Request) -> str:
    """The URL the provider called: the public base URL, the path and the query string."""
    query = request.query_string.decode("latin-1")
    return runtime.settings.public_url + request.path + (f"?{query}" if query else "")


def _ingest(
    runtime: Runtime,
    arrival: Arrival,
    connection: Connection,
    *,
    cached: ActiveEndpoint | None = None,
    reads: int = 0,
) -> Response | list[Recorded]:
    """Look up, verify, answer a handshake or store.

    On PostgreSQL the endpoint usually comes from the cache, already verified, and
    storing is the one round trip; anything a cached copy could get wrong (a signature
    it refuses, a handshake, an endpoint changed since) is done again from the database
    before answering, except a refusal while the endpoint's refusals outrun its rechecks.
    """
    again = partial(_ingest, runtime, arrival, connection, reads=reads + 1)
    endpoint_id = arrival.endpoint_id
    endpoint = cached
    if endpoint is None:
        try:
            endpoint = active_endpoint(connection, endpoint_id, box=runtime.box)
        except NotFound:
            if runtime.endpoints is not None:  # disabled or deleted since it was cached
                runtime.endpoints.drop(endpoint_id)
            raise
        if runtime.endpoints is not None:
            runtime.endpoints.put(endpoint)
    provider = provider_for(runtime, endpoint.provider)
    delivery = arrival.delivery(endpoint)
    if cached is None:
        verify(runtime, endpoint, delivery, arrival.seen)
    handshake = provider.handshake(delivery, secrets=endpoint.secrets)
    if handshake is not None:
        if cached is not None:
            return again()
        return Response(
            handshake.body, status=handshake.status, content_type=handshake.content_type
        )
    incoming = provider.parse(delivery)
    if not incoming and cached is not None:
        return again()  # nothing to store means no guard ran: confirm the endpoint first
    try:
        return record_events(
            connection,
            endpoint=endpoint,
            provider=provider,
            incoming=incoming,
            headers=arrival.headers,
            body=arrival.body,
            now=runtime.clock(),
        )
    except EndpointChanged as exc:
        if runtime.endpoints is not None:
            runtime.endpoints.drop(endpoint_id)
        if reads >= 2:  # changed between each of our reads and writes: let the sender retry
            raise StoreUnavailable("the endpoint is being changed; retry") from exc
        return again()


def _stale_statement(exc: DBAPIError) -> bool:
    """The connection's prepared statement is gone (a pooler, DISCARD ALL) or was planned
    for an older schema."""
    code = getattr(exc.orig, "pgcode", None)
    return code in (INVALID_SQL_STATEMENT_NAME, FEATURE_NOT_SUPPORTED)


def _with_store(runtime: Runtime, work: Callable[[Connection], T]) -> T:
    """Run ``work`` on an ingest connection, answering 503 when the database is away.

    Pooled connections are not pinged before use on this path (it would double its
    round trips): one found dead is replaced and the work run again, once. That is
    safe because storing is idempotent: a retried insert finds its own event.
    """
    for attempt in (1, 2):
        try:
            with runtime.ingest_connection() as connection:
                try:
                    return work(connection)
                except DBAPIError as exc:
                    if _stale_statement(exc):
                        connection.invalidate(exc)  # a new one prepares it afresh
                    raise
        except DBAPIError as exc:
            if (exc.connection_invalidated or _stale_statement(exc)) and attempt == 1:
                log.warning("a pooled database connection was unusable; retrying on a new one")
                continue
            log.error("store unavailable, answered 503: %s", type(exc).__name__)
            raise StoreUnavailable() from exc
        except PoolTimeout as exc:  # the database answers; this process's share is busy
            if runtime.ingest_engine is None:  # SQLite: the one engine's pool
                log.error("store unavailable, answered 503: %s", type(exc).__name__)
                raise StoreUnavailable() from exc
            settings = runtime.settings
            log.warning(
                "all %d ingest connections stayed busy for %s s, answered 503 "
                "(HOOKLATCH_INGEST_CONNECTIONS)",
                settings.ingest_connections,
                settings.ingest_wait_seconds,
            )
            raise StoreUnavailable() from exc
        except SQLAlchemyError as exc:
            log.error("store unavailable, answered 503: %s", type(exc).__name__)
            raise StoreUnavailable() from exc
    raise AssertionError("unreachable")
