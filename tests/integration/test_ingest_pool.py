"""Each web process stores deliveries on a bounded set of connections: a burst beyond
them waits for one instead of opening (and closing) a connection per delivery, and a wait
that runs out is answered 503, nothing stored."""

import threading
from dataclasses import replace

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_pool_secret"


@pytest.fixture
def pooled(settings, router, monkeypatch):
    from hooklatch import create_app, runtime

    monkeypatch.setattr(runtime, "INGEST_CONNECTION_WAIT_SECONDS", 0.5)
    app = create_app(replace(settings, ingest_connections=2), router=router)
    yield app
    app.extensions["hooklatch"].dispose()


def test_a_burst_beyond_the_ingest_connections_shares_them(pooled):
    runtime = pooled.extensions["hooklatch"]
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


def test_a_delivery_that_cannot_get_a_connection_in_time_is_answered_503(pooled):
    runtime = pooled.extensions["hooklatch"]
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    client = pooled.test_client()
    body = stripe_event("evt_pool_wait")
    with runtime.ingest_connection(), runtime.ingest_connection():
        answer = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert answer.status_code == 503
    assert answer.json["error"] == "store_unavailable"
    assert count(runtime, "SELECT count(*) FROM events") == 0
    # The provider's retry, once a connection is free, is stored.
    again = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert again.status_code == 200
    assert count(runtime, "SELECT count(*) FROM events") == 1
