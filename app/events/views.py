"""POST /hooks/<endpoint-id>: look up, verify, record, answer."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from flask import Blueprint, Response, current_app, request
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.endpoints.service import active_endpoint
from app.errors import ProviderUnavailable, StoreUnavailable, VerificationError
from app.events.service import ACCEPTED, DUPLICATE, record_events
from app.logs import bind
from app.runtime import Runtime

bp = Blueprint("events", __name__)
log = logging.getLogger(__name__)


def current_runtime() -> Runtime:
    runtime: Runtime = current_app.extensions["hooklatch"]
    return runtime


@bp.post("/hooks/<endpoint_id>")
def receive(endpoint_id: str) -> Any:
    runtime = current_runtime()
    body = request.get_data(cache=False)  # 413 before reading when over the limit
    headers = {name.lower(): value for name, value in request.headers.items()}
    with bind(endpoint_id=endpoint_id):
        try:
            with runtime.session_factory.begin() as session:
                active = active_endpoint(session, endpoint_id, box=runtime.box)
                try:
                    provider = runtime.provider(active.endpoint.provider)
                except LookupError as exc:
                    raise ProviderUnavailable(str(exc)) from exc
                _verify(provider, headers, body, active.secrets, runtime)
                handshake = provider.handshake(headers, body)
                if handshake is not None:
                    return Response(
                        handshake.body, status=handshake.status, content_type=handshake.content_type
                    )
                recorded = record_events(
                    session,
                    endpoint=active.endpoint,
                    incoming=provider.parse(headers, body),
                    headers=headers,
                    body=body,
                    now=runtime.clock(),
                )
        except SQLAlchemyError as exc:
            log.error("store unavailable, answered 503: %s", type(exc).__name__)
            raise StoreUnavailable() from exc
    accepted = any(item.status == ACCEPTED for item in recorded)
    if accepted:
        runtime.wake_dispatcher()
    return {
        "status": ACCEPTED if accepted else DUPLICATE,
        "events": [item.as_json() for item in recorded],
    }


def _verify(
    provider: Any, headers: dict[str, str], body: bytes, secrets: list[str], runtime: Runtime
) -> None:
    try:
        provider.verify(headers, body, secrets=secrets, now=runtime.clock())
    except VerificationError as exc:
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
        raise


@bp.get("/healthz")
def health() -> Any:
    try:
        with current_runtime().engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    return {"status": "ok"}
