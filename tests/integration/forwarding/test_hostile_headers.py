"""An event whose identity a receiver cannot take as an HTTP header (a type outside
Latin-1, as a provider may send): its forward fails with a reason, like any refusal,
and the destination's other forwards go on, each once."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from sqlalchemy import text

from tests.support.forwarding import add_destination, forwarder, signing_secret
from tests.support.local_http import Answer, LocalServer
from tests.support.pipeline import deliver, drain, make_endpoint


def test_a_type_outside_latin_1_fails_its_forward_and_holds_back_no_other(client, runtime):
    runtime.settings = replace(
        runtime.settings,
        forward_max_attempts=2,
        forward_retry_base_seconds=0.05,
        forward_retry_max_seconds=0.1,
        forward_timeout_seconds=1.0,
        forward_lease_seconds=2.0,
    )
    received: list[str] = []
    lock = threading.Lock()

    def handle(incoming):
        with lock:
            received.append(incoming.headers["webhook-id"])
        return Answer(200)

    endpoint, _ = make_endpoint(runtime)
    with LocalServer(handle) as server:
        add_destination(runtime, "http", {"url": server.url, "signing_secret": signing_secret()})
        deliver(client, endpoint, "evt_hostile", "invoice.\u20ac")
        deliver(client, endpoint, "evt_plain", "invoice.paid")
        drain(runtime, timeout=60)
        with forwarder(runtime):
            time.sleep(6)
    with runtime.session_factory() as session:
        states = dict(
            session.execute(
                text(
                    "SELECT e.external_id, f.status FROM forwards f"
                    " JOIN events e ON e.id = f.event_id"
                )
            ).all()
        )
    assert received == [f"hooklatch:{endpoint}:evt_plain"]
    assert states == {"evt_hostile": "dead", "evt_plain": "delivered"}
