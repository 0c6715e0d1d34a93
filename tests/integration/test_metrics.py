"""GET /metrics in one process: who may read it, what a delivery and an event count, which
secret verified, and the database gauges, which a scrape never waits for."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from prometheus_client import generate_latest
from sqlalchemy import text as sql

from hooklatch.assembly import build_runtime
from hooklatch.metrics import collectors
from hooklatch.operations.backlog import BacklogCollector
from tests.support.database import count
from tests.support.metrics import TOKEN_HEADER, label_values, sample
from tests.support.pipeline import deliver, drain, make_endpoint, post_json, wait_for
from tests.support.processes import with_port
from tests.support.proxy import TcpProxy
from tests.support.series import exported
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import METRICS_TOKEN

OLD, NEW = "whsec_old_secret", "whsec_new_secret"


def metrics_text(client) -> str:
    response = client.get("/metrics", headers=TOKEN_HEADER)
    assert response.status_code == 200, response.json
    assert response.content_type.startswith("text/plain")
    return response.get_data(as_text=True)


def test_metrics_need_a_token_and_are_off_without_one(client, app_with):
    assert client.get("/metrics").status_code == 401
    wrong = client.get("/metrics", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert client.get("/metrics", headers=TOKEN_HEADER).status_code == 200

    off = app_with(admin_token=None).test_client().get("/metrics", headers=TOKEN_HEADER)
    assert off.status_code == 401
    assert off.json["error"] == "metrics_disabled"

    # A read-only token for Prometheus, with or without an admin token.
    reader = app_with(admin_token=None, metrics_token=METRICS_TOKEN).test_client()
    prometheus = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    assert reader.get("/metrics", headers=prometheus).status_code == 200
    assert reader.get("/metrics", headers=TOKEN_HEADER).status_code == 401


def test_deliveries_are_counted_by_provider_endpoint_and_outcome(client, runtime):
    endpoint, _ = make_endpoint(runtime, secrets=[OLD])
    deliver(client, endpoint, "evt_m1", secret=OLD)
    deliver(client, endpoint, "evt_m1", secret=OLD)  # the same event again
    body = stripe_event("evt_m2")
    refused = post_json(client, endpoint, body, stripe_headers(body, "whsec_wrong"))
    assert refused.status_code in (400, 401)
    reason = refused.json["error"]
    client.post("/hooks/ep_no_such_endpoint_1", data=body)
    client.post("/hooks/ep_no_such_endpoint_2", data=body)

    text = metrics_text(client)
    deliveries = "hooklatch_deliveries_total"
    for outcome in ("accepted", "duplicate", reason):
        got = exported(text, deliveries, provider="stripe", endpoint=endpoint, outcome=outcome)
        assert got == 1, outcome
    # A path nobody registered never becomes a label.
    endpoints = label_values(text, deliveries, "endpoint")
    assert not {e for e in endpoints if e.startswith("ep_no_such")}
    assert exported(text, deliveries, endpoint="unknown", outcome="unknown_endpoint") >= 2
    assert exported(text, "hooklatch_ingest_duration_seconds_count", provider="stripe") >= 1


def test_the_fingerprint_of_the_secret_that_verified_is_counted(client, runtime):
    """During a rotation: which of the endpoint's secrets senders still sign with."""
    endpoint, _ = make_endpoint(runtime, secrets=[OLD, NEW])
    deliver(client, endpoint, "evt_rot_1", secret=OLD)
    deliver(client, endpoint, "evt_rot_2", secret=NEW)
    deliver(client, endpoint, "evt_rot_3", secret=NEW)

    text = metrics_text(client)
    old, new = runtime.box.fingerprint(OLD), runtime.box.fingerprint(NEW)
    verified = "hooklatch_verified_deliveries_total"
    assert exported(text, verified, endpoint=endpoint, fingerprint=old) == 1
    assert exported(text, verified, endpoint=endpoint, fingerprint=new) == 2
    assert label_values(text, verified, "fingerprint").isdisjoint({OLD, NEW})


def test_events_are_counted_by_outcome_once_committed(client, runtime, settings, router):
    router.on("stripe", "effect.metrics")(lambda event, ctx: None)

    @router.on("stripe", "fail.metrics")
    def fail(event, ctx):
        raise RuntimeError("always")

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[OLD])
    before = metrics_text(client)

    deliver(client, endpoint, "evt_ok", "effect.metrics", secret=OLD)
    deliver(client, endpoint, "evt_nobody", "nobody.listens", secret=OLD)
    deliver(client, endpoint, "evt_fails", "fail.metrics", secret=OLD)
    drain(runtime, until=lambda: count(runtime, "SELECT count(*) FROM attempts") >= 3)
    drain(
        runtime,
        timeout=30,
        until=lambda: count(runtime, "SELECT count(*) FROM events WHERE status = 'dead'") == 1,
    )

    after = metrics_text(client)

    def added(name: str, **labels: str) -> float:
        """How much a series grew: it must be exported now. Before, it may be absent (0):
        no event of this kind counted yet by this process, the point of ``sample``."""
        return exported(after, name, **labels) - sample(before, name, **labels)

    attempts = settings.max_attempts
    handled = "hooklatch_events_handled_total"
    assert added(handled, provider="stripe", outcome="processed") == 1
    assert added(handled, provider="stripe", outcome="ignored") == 1
    assert added(handled, provider="stripe", outcome="retried") == attempts - 1
    assert added(handled, provider="stripe", outcome="dead") == 1
    lag = "hooklatch_event_start_lag_seconds_count"
    assert added(lag, attempt="first") == 3
    assert exported(after, lag, attempt="retry") >= attempts - 1
    assert exported(after, "hooklatch_handler_duration_seconds_count", provider="stripe") >= 2


def test_database_gauges_are_read_in_the_background_and_kept_through_an_outage(
    settings, runtime, client
):
    endpoint, _ = make_endpoint(runtime, secrets=[OLD])
    deliver(client, endpoint, "evt_waiting_1", secret=OLD)
    deliver(client, endpoint, "evt_waiting_2", secret=OLD)
    dead = deliver(client, endpoint, "evt_dead", secret=OLD)
    with runtime.engine.begin() as connection:  # as a last failed attempt leaves it
        connection.execute(sql("UPDATE events SET status = 'dead' WHERE id = :i"), {"i": dead})
        connection.execute(sql("DELETE FROM outbox WHERE event_id = :i"), {"i": dead})
    host, port = "127.0.0.1", int(settings.database_url.rsplit(":", 1)[1].split("/")[0])
    proxy = TcpProxy((host, port))
    away = build_runtime(
        replace(
            settings,
            database_url=with_port(settings.database_url, proxy.port),
            metrics_cache_seconds=0.1,
        )
    )
    later = runtime.clock() + timedelta(seconds=90)  # the rows were stored 90 s ago
    away.clock = lambda: later
    try:
        registry = collectors(BacklogCollector(away))

        def text() -> str:
            return generate_latest(registry).decode()

        # hooklatch_backlog_up is exported from the first scrape on, read or not.
        wait_for(lambda: exported(text(), "hooklatch_backlog_up") == 1, timeout=10)
        read = text()
        assert exported(read, "hooklatch_outbox_waiting_rows") == 2
        assert exported(read, "hooklatch_events_pending") == 2
        assert exported(read, "hooklatch_events_dead") == 1
        assert 90 <= exported(read, "hooklatch_outbox_oldest_age_seconds") < 150
        assert exported(read, "hooklatch_processes_alive", kind="worker") == 0

        proxy.stop()
        away.engine.dispose()
        wait_for(lambda: exported(text(), "hooklatch_backlog_up") == 0, timeout=10)
        during = text()  # the last values read, with their age
        assert exported(during, "hooklatch_outbox_waiting_rows") == 2
        assert exported(during, "hooklatch_backlog_age_seconds") > 0
    finally:
        if not proxy._stop.is_set():
            proxy.stop()
        away.dispose()
