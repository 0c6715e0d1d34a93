"""Redis or PostgreSQL goes away: ingest keeps its promises, nothing is lost or run twice."""

from __future__ import annotations

import time
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
import redis as redis_lib
import requests
from rq import Queue

from hooklatch import create_app
from hooklatch.jobs import SERIALIZER
from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_drained, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    retry_waits,
    start_gunicorn,
    start_redis,
    with_port,
)
from tests.support.proxy import CountingListener, TcpProxy
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


# -- helpers -----------------------------------------------------------------------


def post(url, external_id, event_type="effect.outage"):
    body = stripe_event(external_id, event_type=event_type)
    return requests.post(url, data=body, headers=stripe_headers(body, SECRET), timeout=20)


@pytest.fixture
def proxies():
    started: list[TcpProxy] = []

    def start(target, port=0):
        proxy = TcpProxy(target, port)
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        if not proxy._stop.is_set():
            proxy.stop()


# -- Redis outage ------------------------------------------------------------------


@pytest.mark.slow
def test_redis_down_ingest_still_stores_and_everything_is_processed_once_when_it_returns(
    procs, proc_settings, runtime, tmp_path
):
    port = free_port()
    redis_proc = start_redis(procs, port, tmp_path)
    settings = replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0")
    env = process_env(settings)
    base, web = start_gunicorn(procs, settings, workers=2)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    url = f"{base}/hooks/{endpoint}"

    def logs():
        return f"\nrelay:\n{relay.log()}\nworker:\n{worker.log()}\nweb:\n{web.log()}"

    # The worker is up and listening on the queue before Redis goes away.
    wait_for(lambda: listening(worker), timeout=20, message="worker listening")

    redis_proc.kill()
    ids = [f"evt_outage_{n:02d}" for n in range(20)]
    answers = [post(url, external_id) for external_id in ids]
    assert [a.status_code for a in answers] == [200] * 20, [a.text for a in answers]
    assert [a.json()["status"] for a in answers] == ["accepted"] * 20
    assert count(runtime, "SELECT count(*) FROM events") == 20

    time.sleep(2)  # the relay tries (and fails) to push meanwhile
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'") == 20
    # Nothing could be relayed: every event still has its outbox row.
    assert (
        count(
            runtime,
            "SELECT count(DISTINCT e.id) FROM events e JOIN outbox o ON o.event_id = e.id",
        )
        == 20
    ), logs()
    assert count(runtime, "SELECT count(*) FROM test_effects") == 0
    assert relay.popen.poll() is None, f"relay exited while Redis was down{logs()}"
    assert worker.popen.poll() is None, f"worker exited while Redis was down{logs()}"

    start_redis(procs, port, tmp_path)  # a new, empty Redis on the same port
    try:
        wait_for(
            lambda: count(runtime, "SELECT count(*) FROM events WHERE status = 'processed'") == 20,
            timeout=45,
            message="all 20 events processed",
        )
        redis = redis_lib.Redis.from_url(settings.redis_url)
        queue = Queue(settings.queue_name, connection=redis, serializer=SERIALIZER)
        wait_drained(runtime, queue)
    except AssertionError as exc:
        raise AssertionError(f"{exc}{logs()}") from None
    with runtime.engine.connect() as c:
        effects = sorted(r[0] for r in c.exec_driver_sql("SELECT external_id FROM test_effects"))
    assert effects == ids  # exactly one effect per event, none twice
    assert count(runtime, "SELECT count(*) FROM events WHERE attempts <> 1") == 0
    assert worker.popen.poll() is None and relay.popen.poll() is None


# -- PostgreSQL unreachable --------------------------------------------------------


def test_postgres_unreachable_answers_503_with_retry_after_never_200(settings, router, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    closed = free_port()
    app = create_app(
        replace(settings, database_url=f"postgresql://postgres@127.0.0.1:{closed}/x"), router=router
    )
    try:
        body = stripe_event("evt_no_store", event_type="effect.nostore")
        response = app.test_client().post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
        )
    finally:
        app.extensions["hooklatch"].dispose()
    assert response.status_code == 503, response.json
    assert response.json is not None and response.json["error"] == "store_unavailable"
    assert response.headers.get("Retry-After")
    assert count(runtime, "SELECT count(*) FROM events") == 0


@pytest.mark.slow
def test_postgres_lost_and_back_under_gunicorn_answers_503_then_recovers(
    procs, proc_settings, runtime, proxies
):
    pg = urlsplit(proc_settings.database_url)
    proxy = proxies((pg.hostname, pg.port or 5432))
    port = proxy.port
    base, web = start_gunicorn(
        procs,
        replace(proc_settings, database_url=with_port(proc_settings.database_url, port)),
        workers=2,
    )
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    url = f"{base}/hooks/{endpoint}"

    # Warm both workers' pools through the proxy.
    before = [post(url, f"evt_before_{n}") for n in range(4)]
    assert [r.status_code for r in before] == [200] * 4, [r.text for r in before]

    proxy.stop()
    during = [post(url, f"evt_during_{n}") for n in range(6)]
    assert [r.status_code for r in during] == [503] * 6, [r.text for r in during]
    assert {r.json()["error"] for r in during} == {"store_unavailable"}
    assert all(r.headers.get("Retry-After") for r in during)

    proxy = proxies((pg.hostname, pg.port or 5432), port)  # back on the same port
    after = [post(url, f"evt_after_{n}") for n in range(6)]
    assert [r.status_code for r in after] == [200] * 6, ([r.text for r in after], web.log())
    assert {r.json()["status"] for r in after} == {"accepted"}

    # A bounce that no request saw: every pooled connection is now dead, and pre-ping must
    # replace it instead of answering 503 with it.
    proxy.stop()
    proxies((pg.hostname, pg.port or 5432), port)
    bounced = [post(url, f"evt_bounced_{n}") for n in range(6)]
    assert [r.status_code for r in bounced] == [200] * 6, ([r.text for r in bounced], web.log())

    stored = count(runtime, "SELECT count(*) FROM events WHERE external_id LIKE 'evt_during_%'")
    assert stored == 0  # a 503 stored nothing (the provider will retry)
    assert count(runtime, "SELECT count(*) FROM events") == 16


# -- no Redis on the request path --------------------------------------------------


def accepted(app, external_id):
    """A delivery to a new endpoint of ``app``: answered 200, "accepted"."""
    endpoint, _ = make_endpoint(app.extensions["hooklatch"], "stripe", secrets=[SECRET])
    body = stripe_event(external_id, event_type="effect.noredis")
    response = app.test_client().post(
        f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
    )
    assert response.status_code == 200, response.json
    assert response.json is not None and response.json["status"] == "accepted"


def test_ingest_makes_no_redis_call(settings, router):
    closed = free_port()
    app = create_app(replace(settings, redis_url=f"redis://127.0.0.1:{closed}/0"), router=router)
    runtime = app.extensions["hooklatch"]
    try:
        accepted(app, "evt_no_redis")
        assert count(runtime, "SELECT count(*) FROM events WHERE external_id = 'evt_no_redis'") == 1
        assert count(runtime, "SELECT count(*) FROM outbox") == 1
    finally:
        runtime.dispose()


def test_ingest_opens_no_connection_to_redis(settings, router):
    """Stronger than a closed port: a call whose error were swallowed would still be seen."""
    listener = CountingListener()
    app = create_app(
        replace(settings, redis_url=f"redis://127.0.0.1:{listener.port}/0"), router=router
    )
    runtime = app.extensions["hooklatch"]
    try:
        accepted(app, "evt_no_redis_2")
        time.sleep(0.3)  # a connection attempt made in the background would show up now
        assert listener.accepted == 0
    finally:
        listener.stop()
        runtime.dispose()


@pytest.mark.slow
def test_a_relay_started_while_redis_is_down_waits_for_it_then_relays(
    procs, proc_settings, runtime, client, tmp_path
):
    port = free_port()
    settings = replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0")
    env = process_env(settings)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_relay_waited_for_redis", event_type="effect.waited")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200
    relay = procs("relay", hooklatch_cmd("relay"), env)
    wait_for(
        lambda: relay.log().count("relay pass failed") >= 2,
        timeout=30,
        message="the relay saying twice that it cannot push to Redis",
    )
    log = relay.log()
    assert relay.popen.poll() is None, log
    retry_waits(log, "relay pass failed", 2)
    assert count(runtime, "SELECT count(*) FROM outbox WHERE job_id IS NULL") == 1

    start_redis(procs, port, tmp_path)
    procs("worker", hooklatch_cmd("worker"), env)
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == 1,
        timeout=30,
        message=f"the event processed once Redis answered\n{relay.log()}",
    )
    relay.stop()
