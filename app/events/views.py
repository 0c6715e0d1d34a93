"""POST /hooks/<endpoint-id>: look up, verify, record, answer."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from flask import Blueprint, Response, current_app, request
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from app.endpoints.service import active_endpoint
from app.errors import ProviderUnavailable, StoreUnavailable, VerificationError
from app.events.service import ACCEPTED, DUPLICATE, EndpointChanged, Recorded, record_events
from app.logs import bind
from app.runtime import Runtime

bp = Blueprint("events", __name__)
log = logging.getLogger(__name__)
T = TypeVar("T")


def current_runtime() -> Runtime:
    runtime: Runtime = current_app.extensions["hooklatch"]
    return runtime


@bp.post("/hooks/<endpoint_id>")
def receive(endpoint_id: str) -> Any:
    runtime = current_runtime()
    body = request.get_data(cache=False)  # 413 before reading when over the limit
    headers = {name.lower(): value for name, value in request.headers.items()}
    with bind(endpoint_id=endpoint_id):
        outcome = _with_store(runtime, partial(_ingest, runtime, endpoint_id, headers, body))
    if isinstance(outcome, Response):
        return outcome
    accepted = any(item.status == ACCEPTED for item in outcome)
    if accepted:
        runtime.wake_dispatcher()
    return {
        "status": ACCEPTED if accepted else DUPLICATE,
        "events": [item.as_json() for item in outcome],
    }


def _ingest(
    runtime: Runtime,
    endpoint_id: str,
    headers: dict[str, str],
    body: bytes,
    connection: Connection,
    *,
    reads: int = 0,
) -> Response | list[Recorded]:
    """Look up, verify, answer a handshake or store.

    On PostgreSQL the endpoint usually comes from the cache and storing is the one round
    trip; anything a cached copy could get wrong (a signature it refuses, a handshake,
    an endpoint changed since) is done again from the database before answering.
    """
    again = partial(_ingest, runtime, endpoint_id, headers, body, connection, reads=reads + 1)
    cache = None if reads else runtime.endpoints
    endpoint = cache.get(endpoint_id) if cache is not None else None
    if endpoint is None:
        cache = None
        endpoint = active_endpoint(connection, endpoint_id, box=runtime.box)
        if runtime.endpoints is not None:
            runtime.endpoints.put(endpoint)
    try:
        provider = runtime.provider(endpoint.provider)
    except LookupError as exc:
        raise ProviderUnavailable(str(exc)) from exc
    try:
        provider.verify(headers, body, secrets=endpoint.secrets, now=runtime.clock())
    except VerificationError as exc:
        if cache is not None:
            return again()
        _log_refusal(exc, headers, body)
        raise
    handshake = provider.handshake(headers, body)
    if handshake is not None:
        if cache is not None:
            return again()
        return Response(
            handshake.body, status=handshake.status, content_type=handshake.content_type
        )
    try:
        return record_events(
            connection,
            endpoint=endpoint,
            incoming=provider.parse(headers, body),
            headers=headers,
            body=body,
            now=runtime.clock(),
        )
    except EndpointChanged as exc:
        if runtime.endpoints is not None:
            runtime.endpoints.drop(endpoint_id)
        if reads >= 2:  # changed between each of our reads and writes: let the sender retry
            raise StoreUnavailable("the endpoint is being changed; retry") from exc
        return again()


def _with_store(runtime: Runtime, work: Callable[[Connection], T]) -> T:
    """Run ``work`` on an ingest connection, answering 503 when the database is away.

    Pooled connections are not pinged before use on this path (it would double its
    round trips): one found dead is replaced and the work run again, once. That is
    safe because storing is idempotent: a retried insert finds its own event.
    """
    for attempt in (1, 2):
        try:
            with runtime.ingest_connection() as connection:
                return work(connection)
        except DBAPIError as exc:
            if exc.connection_invalidated and attempt == 1:
                log.warning("a pooled database connection was dead; retrying on a new one")
                continue
            log.error("store unavailable, answered 503: %s", type(exc).__name__)
            raise StoreUnavailable() from exc
        except SQLAlchemyError as exc:
            log.error("store unavailable, answered 503: %s", type(exc).__name__)
            raise StoreUnavailable() from exc
    raise AssertionError("unreachable")


def _log_refusal(exc: VerificationError, headers: dict[str, str], body: bytes) -> None:
    # Safe facts only: never a secret, never the body.
    log.warning(
        "refused delivery: %s (%s); headers present: %s; body %d bytes sha256 %s",
        exc.reason,
        exc.message,
        ",".join(sorted(headers)),
        len(body),
        hashlib.sha256(body).hexdigest()[:16],
        extra={"reason": exc.reason},
    )


@bp.get("/healthz")
def health() -> Any:
    try:
        with current_runtime().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    return {"status": "ok"}
