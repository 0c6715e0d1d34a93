"""The embedded default (SQLite, no Redis for jobs) forwards as PostgreSQL does: forwards
written as its dispatcher runs events in its own thread, sent by the forwarder, once."""

from __future__ import annotations

import pytest

from hooklatch.embedded.sinks import InlineSink
from hooklatch.workers.relay.loop import Relay
from tests.support.database import count, sqlite_settings
from tests.support.forwarding import add_destination, forward_all, keys_of, redis_stream
from tests.support.pipeline import deliver, make_endpoint


@pytest.fixture
def settings(settings, tmp_path):
    return sqlite_settings(settings, tmp_path / "db")


def test_on_sqlite_processed_events_are_forwarded_each_once(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    with redis_stream() as (given, read):
        add_destination(runtime, "redis", given, endpoint=endpoint, types=("invoice.*",))
        for n in range(20):
            deliver(client, endpoint, f"evt_{n:03d}", "invoice.paid")
        deliver(client, endpoint, "evt_other", "charge.refunded")
        relay = Relay(runtime, InlineSink(runtime))
        while relay.relay_once():
            pass
        assert count(runtime, "SELECT count(*) FROM forwards") == 20
        forward_all(runtime, 20)
        received = read()
    invoices = keys_of(runtime, endpoint) - {f"hooklatch:{endpoint}:evt_other"}
    assert sorted(received.keys) == sorted(invoices)
