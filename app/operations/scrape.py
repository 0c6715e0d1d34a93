"""GET /metrics: every process's counts (hooklatch.metrics) and the database gauges
(hooklatch.operations.backlog), in Prometheus' text format.

The web port is the one providers reach, and the labels name endpoint ids, so a scrape
must present a token: ``Authorization: Bearer`` with HOOKLATCH_METRICS_TOKEN (read
only: give it to Prometheus) or the admin token. With neither set, /metrics answers 401
``metrics_disabled``. A wrong token counts against the client's address as the admin
API's do (hooklatch.operations.access). Relays and workers serve theirs on ports of their
own (HOOKLATCH_RELAY_METRICS_PORT, HOOKLATCH_WORKER_METRICS_PORT) without a token, on
HOOKLATCH_METRICS_ADDRESS (by default 127.0.0.1, this host only): their labels name no
endpoint.
"""

from __future__ import annotations

from flask import Blueprint, Flask, current_app, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from werkzeug.wrappers import Response

from hooklatch.errors import Unauthorized
from hooklatch.metrics import collectors
from hooklatch.operations.access import current_guard, request_address
from hooklatch.operations.backlog import BacklogCollector
from hooklatch.runtime import Runtime

bp = Blueprint("metrics", __name__)
METRICS_TOKEN = "HOOKLATCH_METRICS_TOKEN"  # noqa: S105  (the variable's name)


def init_app(app: Flask, runtime: Runtime) -> None:
    """Serve /metrics on ``app``; the tokens it accepts are fixed here, at start."""
    tokens = [runtime.settings.metrics_token or "", runtime.settings.admin_token or ""]
    app.extensions["hooklatch.metrics"] = (
        collectors(BacklogCollector(runtime, per_endpoint=True)),
        [token for token in tokens if token],
    )
    app.register_blueprint(bp)


@bp.get("/metrics")
def metrics() -> Response:
    registry: CollectorRegistry
    registry, tokens = current_app.extensions["hooklatch.metrics"]
    if not tokens:
        raise Unauthorized(
            f"/metrics is off: set {METRICS_TOKEN} (or HOOKLATCH_ADMIN_TOKEN)",
            reason="metrics_disabled",
        )
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    bearer = given if scheme.lower() == "bearer" else ""
    # The admin API's check: failures count against the address, 429 once locked out.
    if not current_guard().check(bearer, tokens, address=request_address()):
        raise Unauthorized(
            f"a valid 'Authorization: Bearer <{METRICS_TOKEN} or admin token>' header is required"
        )
    return Response(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
