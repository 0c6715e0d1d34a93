"""The destinations' database gauges (hooklatch_forwards_pending, hooklatch_forwards_dead,
hooklatch_forward_oldest_pending_seconds, hooklatch_destination_paused), by destination
name, in the web's /metrics and a relay's alike. The alert rules that read them are
tested with promtool in test_alerts.py.

Destinations are seeded directly (tests.support.forwarding): what is shown is the
subject here, not how a kind of destination checks its settings."""

from __future__ import annotations

from datetime import timedelta

from prometheus_client import generate_latest
from sqlalchemy import text

from hooklatch.metrics import collectors
from hooklatch.operations.backlog import BacklogCollector, read_backlog
from hooklatch.operations.forwarding import DestinationSignals
from tests.support.forwarding_rows import seed_destination, seed_forwards
from tests.support.metrics import TOKEN_HEADER
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.series import exported

GAUGES = (
    "hooklatch_forwards_pending",
    "hooklatch_forwards_dead",
    "hooklatch_forward_oldest_pending_seconds",
    "hooklatch_destination_paused",
)


def test_each_destination_has_its_pending_dead_oldest_and_paused(runtime):
    endpoint, _ = make_endpoint(runtime)
    orders = seed_destination(runtime, "orders")
    audit = seed_destination(runtime, "audit-trail", paused=True)
    seed_destination(runtime, "idle")
    seed_forwards(runtime, orders, endpoint, {"pending": 3}, age=timedelta(minutes=20))
    seed_forwards(runtime, orders, endpoint, {"pending": 1, "dead": 2}, prefix="new")
    seed_forwards(runtime, orders, endpoint, {"delivered": 5}, age=timedelta(hours=2))
    seed_forwards(runtime, audit, endpoint, {"pending": 4, "dead": 1}, age=timedelta(minutes=3))

    shown = {item.name: item for item in read_backlog(runtime).destinations}

    assert set(shown) == {"orders", "audit-trail", "idle"}
    assert shown["idle"] == DestinationSignals("idle", False, 0, 0, 0.0)
    assert (shown["orders"].pending, shown["orders"].dead, shown["orders"].paused) == (4, 2, False)
    assert 20 * 60 <= shown["orders"].oldest_pending_seconds < 21 * 60
    assert (shown["audit-trail"].pending, shown["audit-trail"].dead) == (4, 1)
    assert shown["audit-trail"].paused
    assert 3 * 60 <= shown["audit-trail"].oldest_pending_seconds < 4 * 60


def test_the_gauges_are_in_the_web_and_the_relay_scrapes_by_destination_name(
    settings, runtime, client
):
    endpoint, _ = make_endpoint(runtime)
    orders = seed_destination(runtime, "orders")
    seed_destination(runtime, "paused-one", paused=True)
    seed_forwards(runtime, orders, endpoint, {"pending": 2, "dead": 1}, age=timedelta(minutes=15))

    def web() -> str:
        return client.get("/metrics", headers=TOKEN_HEADER).get_data(as_text=True)

    wait_for(lambda: "destination=" in web(), timeout=10, message="the gauges read")
    relay = collectors(BacklogCollector(runtime))  # a relay's port: no per-endpoint series
    wait_for(lambda: "destination=" in generate_latest(relay).decode(), timeout=10, message="read")
    for scraped in (web(), generate_latest(relay).decode()):
        assert exported(scraped, "hooklatch_forwards_pending", destination="orders") == 2
        assert exported(scraped, "hooklatch_forwards_dead", destination="orders") == 1
        oldest = exported(scraped, "hooklatch_forward_oldest_pending_seconds", destination="orders")
        assert 15 * 60 <= oldest < 16 * 60
        assert exported(scraped, "hooklatch_destination_paused", destination="orders") == 0
        assert exported(scraped, "hooklatch_destination_paused", destination="paused-one") == 1
        for name in ("hooklatch_forwards_pending", "hooklatch_forward_oldest_pending_seconds"):
            assert exported(scraped, name, destination="paused-one") == 0
        assert 'destination="dst_' not in scraped  # labelled by name, never by id


def test_the_families_are_named_with_no_destination_and_go_when_it_does(runtime, settings):
    registry = collectors(BacklogCollector(runtime))
    wait_for(
        lambda: exported(generate_latest(registry).decode(), "hooklatch_backlog_up") == 1,
        timeout=10,
        message="the gauges read",
    )
    empty = generate_latest(registry).decode()
    assert all(f"# TYPE {name} gauge" in empty for name in GAUGES)
    assert "destination=" not in empty

    endpoint, _ = make_endpoint(runtime)
    gone = seed_destination(runtime, "gone-soon")
    seed_forwards(runtime, gone, endpoint, {"dead": 1})
    assert [item.name for item in read_backlog(runtime).destinations] == ["gone-soon"]
    with runtime.engine.begin() as connection:
        connection.execute(text("DELETE FROM destinations WHERE id = :d"), {"d": gone})
    assert read_backlog(runtime).destinations == ()
