"""Each web process stores deliveries on a bounded set of connections: a burst beyond
them waits for one instead of opening (and closing) a connection per delivery, a wait
that runs out is answered 503 with nothing stored, and refusal counts that could not get
a connection are kept for later."""

import logging
import threading

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_pool_secret"


@pytest.fixture
def pooled(app_with):
    """Apps with two ingest connections, waiting ``wait`` seconds for one."""

    def make(wait=5.0, **changes):
        app = app_with(ingest_connections=2, ingest_wait_seconds=wait, **changes)
        return app, app.extensions["hooklatch"]

    return make


def post_stripe(client, endpoint, event_id, secret=SECRET):
    body = stripe_event(event_id)
    return client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret))


def test_a_burst_beyond_the_ingest_connections_shares_them(pooled):
    _, runtime = pooled()
    barrier = threading.Barrier(6)
    backends, errors = [], []

    def store():
        try:
            barrier.wait(timeout=5)
            with runtime.ingest_connection() as connection:
                backends.append(
                    connection.exec_driver_sql(
                        "SELECT pg_backend_pid() FROM pg_sleep(0.05)"
                    ).scalar_one()
                )
        except Exception as exc:
            errors.append(exc)

    threads = [threading.Thread(target=store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(backends) == 6
    # Six at once, two connections: the others waited their turn on the same two
    # backends rather than each opening a connection of its own.
    assert len(set(backends)) == 2


def test_a_delivery_that_cannot_get_a_connection_in_time_is_answered_503(pooled, caplog):
    app, runtime = pooled(wait=0.3)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    client = app.test_client()
    with (
        caplog.at_level(logging.WARNING, logger="hooklatch"),
        runtime.ingest_connection(),
        runtime.ingest_connection(),
    ):
        answer = post_stripe(client, endpoint, "evt_pool_wait")
    assert answer.status_code == 503
    assert answer.json["error"] == "store_unavailable"
    assert "all 2 ingest connections stayed busy for 0.3 s" in caplog.text
    assert count(runtime, "SELECT count(*) FROM events") == 0
    # The provider's retry, once a connection is free, is stored.
    assert post_stripe(client, endpoint, "evt_pool_wait").status_code == 200
    assert count(runtime, "SELECT count(*) FROM events") == 1


def test_refusals_counted_while_the_connections_are_busy_are_written_later(pooled):
    _, runtime = pooled(wait=0.3, refusal_flush_seconds=600)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    with runtime.ingest_connection(), runtime.ingest_connection():
        for _ in range(3):  # the first of a process are written at once, if they can be
            runtime.refusals.add(endpoint, "bad_signature", now=runtime.clock())
    runtime.refusals.flush()
    assert count(runtime, "SELECT coalesce(sum(count), 0) FROM refusals") == 3


@pytest.mark.parametrize("interval", [0.0, 0.05])
def test_counts_the_database_cannot_take_are_tried_again_after_a_pause(settings, interval):
    """A failed write waits before the next try: the writing thread must not spin on an
    unreachable database (or a busy pool) as fast as it can connect."""
    from hooklatch.db import make_engine, utcnow
    from hooklatch.endpoints.refusals import RefusalCounter
    from tests.support.processes import free_port, with_port

    away = make_engine(with_port(settings.database_url, free_port()))
    tries = []

    def connect():
        tries.append(1)
        return away.connect()

    counter = RefusalCounter(connect, interval=interval, burst=1)
    try:
        counter.add("ep_away", "bad_signature", now=utcnow())
        threading.Event().wait(1.2)
        assert 2 <= len(tries) <= 4, len(tries)  # the refusal's own try, then 1 s later
    finally:
        counter.close()  # what it holds stays unwritten: the database is still away
        away.dispose()
