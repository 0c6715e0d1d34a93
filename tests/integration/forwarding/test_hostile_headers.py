"""An event whose identity HTTP cannot carry as it is (a type outside Latin-1, as a
provider may send): its headers go percent-encoded as UTF-8, and every forward of the
destination goes once."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from sqlalchemy import text

from tests.support.forwarding import add_destination, forwarder, signing_secret
from tests.support.local_http import Answer, LocalServer
from tests.support.pipeline import deliver, drain, make_endpoint


def test_a_type_outside_latin_1_goes_percent_encoded_and_every_forward_goes_once(client, runtime):
    runtime.settings = replace(
        runtime.settings,
        forward_max_attempts=2,
        forward_retry_base_seconds=0.05,
        forward_retry_max_seconds=0.1,
        forward_timeout_seconds=1.0,
        forward_lease_seconds=2.0,
    )
    received: list[str] = []
    types: list[str] = []
    lock = threading.Lock()

    def handle(incoming):
        with lock:
            received.append(incoming.headers["webhook-id"])
            types.append(incoming.headers["hooklatch-event-type"])
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
    assert sorted(received) == [
        f"hooklatch:{endpoint}:evt_hostile",
        f"hooklatch:{endpoint}:evt_plain",
    ]
    assert sorted(types) == ["invoice.%E2%82%AC", "invoice.paid"]
    assert states == {"evt_hostile": "delivered", "evt_plain": "delivered"}
