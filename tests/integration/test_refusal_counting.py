"""Refused deliveries are counted in memory and written to the refusals table a few times
per flush interval, not once each: a flood of bad signatures costs a bounded number of
writes, and the counts `hooklatch endpoints show` reads are exact once flushed."""

import logging
import math
import sys
import time
from dataclasses import replace

import pytest
import requests
from sqlalchemy import event

from hooklatch import create_app
from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.processes import free_port, process_env, wait_http, with_port
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def refused(runtime, endpoint, reason="bad_signature"):
    return count(
        runtime,
        "SELECT coalesce(sum(count), 0) FROM refusals WHERE endpoint_id = :e AND reason = :r",
        e=endpoint,
        r=reason,
    )


class Writes:
    """The statements that touch the refusals table, on every engine of a runtime."""

    def __init__(self, runtime):
        self.engines = [e for e in (runtime.engine, runtime.ingest_engine) if e is not None]
        self.seen = []

    def _seen(self, connection, cursor, statement, *args):
        if "refusals" in statement:
            self.seen.append(statement)

    def __enter__(self):
        for engine in self.engines:
            event.listen(engine, "before_cursor_execute", self._seen)
        return self

    def __exit__(self, *exc):
        for engine in self.engines:
            event.remove(engine, "before_cursor_execute", self._seen)


@pytest.fixture
def flood(settings, router):
    """A client and runtime whose refusals are flushed every 0.5 s."""
    app = create_app(replace(settings, refusal_flush_seconds=0.5), router=router)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


def bad_signatures(client, endpoint, n):
    body = stripe_event("evt_forged")
    headers = stripe_headers(body, "whsec_not_the_secret")
    for _ in range(n):
        assert client.post(f"/hooks/{endpoint}", data=body, headers=headers).status_code == 401


def test_a_flood_of_bad_signatures_costs_a_bounded_number_of_writes(flood):
    client, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    interval = runtime.settings.refusal_flush_seconds
    started = time.monotonic()
    with Writes(runtime) as writes:
        bad_signatures(client, endpoint, 400)
        elapsed = time.monotonic() - started
        runtime.refusals.flush()
    # The first few at once, then at most one write per interval, plus the flush above.
    bound = runtime.refusals.burst + math.ceil(elapsed / interval) + 1
    assert len(writes.seen) <= bound, (len(writes.seen), bound)
    assert refused(runtime, endpoint) == 400


def test_a_flood_is_logged_a_line_per_write_and_every_refusal_is_accounted_for(flood, caplog):
    """The first refusals are logged one by one; the rest of a flood are summed up in a
    line per endpoint and reason each time their count is written."""
    client, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    interval = runtime.settings.refusal_flush_seconds
    caplog.set_level(logging.WARNING)
    started = time.monotonic()
    bad_signatures(client, endpoint, 400)
    elapsed = time.monotonic() - started
    runtime.refusals.flush()
    messages = [r.getMessage() for r in caplog.records]
    one_by_one = [m for m in messages if m.startswith("refused delivery:")]
    summed = [m for m in messages if m.startswith("refused deliveries:")]
    assert len(one_by_one) + len(summed) <= 2 * (
        runtime.refusals.burst + math.ceil(elapsed / interval) + 1
    ), (len(one_by_one), len(summed))
    assert len(one_by_one) >= runtime.refusals.burst
    counts = [int(m.split()[2]) for m in summed]  # "refused deliveries: 37 more for ..."
    assert len(one_by_one) + sum(counts) == 400
    assert all(endpoint in m and "bad_signature" in m for m in summed), summed


def test_counts_are_written_within_the_interval_without_another_request(flood):
    _, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    for _ in range(60):  # at once: the first ten are written, the rest held
        runtime.refusals.add(endpoint, "bad_signature", now=runtime.clock())
    assert refused(runtime, endpoint) == runtime.refusals.burst
    interval = runtime.settings.refusal_flush_seconds
    wait_for(lambda: refused(runtime, endpoint) == 60, timeout=4 * interval + 1, interval=0.05)


def test_refusals_counted_at_the_same_moment_are_written_on_one_connection(flood):
    """Many requests refused at once (a flood's first moment) must not each open a
    database connection to write their count: one writes, the others' counts wait."""
    import threading
    from contextlib import contextmanager

    _, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    lock, open_now, most = threading.Lock(), [0], [0]

    @contextmanager
    def counted_connect():
        with lock:
            open_now[0] += 1
            most[0] = max(most[0], open_now[0])
        try:
            time.sleep(0.05)  # a write that takes a while, so that others overlap it
            with runtime.ingest_connection() as connection:
                yield connection
        finally:
            with lock:
                open_now[0] -= 1

    runtime.refusals.connect = counted_connect
    threads = [
        threading.Thread(
            target=runtime.refusals.add,
            args=(endpoint, "bad_signature"),
            kwargs={"now": runtime.clock()},
        )
        for _ in range(runtime.refusals.burst)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    interval = runtime.settings.refusal_flush_seconds
    wait_for(
        lambda: refused(runtime, endpoint) == runtime.refusals.burst,
        timeout=4 * interval + 1,
        interval=0.05,
    )
    assert most[0] == 1


def test_a_flush_interval_of_zero_writes_each_refusal_with_its_own_statement(settings, router):
    app = create_app(replace(settings, refusal_flush_seconds=0), router=router)
    runtime = app.extensions["hooklatch"]
    try:
        endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
        with Writes(runtime) as writes:
            bad_signatures(app.test_client(), endpoint, 25)
        assert len(writes.seen) == 25
        assert refused(runtime, endpoint) == 25
    finally:
        runtime.dispose()


def test_a_few_refusals_are_written_at_once(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    bad_signatures(client, endpoint, 3)
    assert refused(runtime, endpoint) == 3


def test_counts_from_several_reasons_and_processes_add_up(settings, router):
    apps = [create_app(replace(settings, refusal_flush_seconds=60), router=router) for _ in "ab"]
    runtimes = [app.extensions["hooklatch"] for app in apps]
    try:
        endpoint, _ = make_endpoint(runtimes[0], "stripe", secrets=[SECRET])
        body = stripe_event("evt_old")
        stale = stripe_headers(body, SECRET, timestamp=int(time.time()) - 3600)
        for app in apps:
            client = app.test_client()
            bad_signatures(client, endpoint, 30)
            for _ in range(15):
                response = client.post(f"/hooks/{endpoint}", data=body, headers=stale)
                assert response.status_code == 401
        for runtime in runtimes:
            runtime.refusals.flush()
        assert refused(runtimes[0], endpoint) == 60
        assert refused(runtimes[0], endpoint, "stale_timestamp") == 30
        with runtimes[0].engine.connect() as connection:
            first, last = connection.exec_driver_sql(
                "SELECT min(first_at), max(last_at) FROM refusals"
            ).one()
        assert first <= last
    finally:
        for runtime in runtimes:
            runtime.dispose()


def test_a_refusal_held_for_a_deleted_endpoint_is_dropped_not_retried(flood):
    from hooklatch.endpoints.models import Endpoint

    client, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    kept, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    bad_signatures(client, endpoint, 40)
    bad_signatures(client, kept, 40)
    with runtime.session_factory.begin() as session:
        session.delete(session.get(Endpoint, endpoint))
    runtime.refusals.flush()
    assert refused(runtime, kept) == 40
    with Writes(runtime) as writes:
        runtime.refusals.flush()
    assert writes.seen == []


def test_counts_held_while_their_database_is_away_are_written_once_it_is_back(flood):
    from hooklatch.db import make_engine

    client, runtime = flood
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    away = make_engine(with_port(runtime.settings.database_url, free_port()))
    runtime.refusals.connect = away.connect
    try:
        bad_signatures(client, endpoint, 30)  # still answered 401: counting is best effort
        runtime.refusals.flush()
        assert refused(runtime, endpoint) == 0
    finally:
        runtime.refusals.connect = runtime.ingest_connection
        away.dispose()
    runtime.refusals.flush()
    assert refused(runtime, endpoint) == 30


def start_web(procs, settings, worker_class):
    """gunicorn as the Procfile runs it, one worker of ``worker_class``, refusals held for
    ten minutes."""
    port = free_port()
    env = process_env(
        settings, GUNICORN_WORKER_CLASS=worker_class, HOOKLATCH_REFUSAL_FLUSH_SECONDS="600"
    )
    args = [sys.executable, "-m", "gunicorn", "wsgi:app", "-c", "gunicorn.conf.py"]
    web = procs("gunicorn", [*args, "--bind", f"127.0.0.1:{port}", "--workers", "1"], env)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", web)
    return base, web


@pytest.mark.slow
@pytest.mark.parametrize("worker_class", ["sync", "gevent", "gthread"])
def test_gunicorn_writes_held_counts_when_a_worker_exits(procs, settings, runtime, worker_class):
    """A worker stopped before its interval ends writes what it holds on the way out."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    base, web = start_web(procs, settings, worker_class)
    body = stripe_event("evt_forged")
    headers = stripe_headers(body, "whsec_not_the_secret")
    with requests.Session() as http:
        for _ in range(100):
            answer = http.post(f"{base}/hooks/{endpoint}", data=body, headers=headers)
            assert answer.status_code == 401
    assert refused(runtime, endpoint) < 100
    web.stop()
    assert web.popen.returncode == 0, web.log()
    assert refused(runtime, endpoint) == 100


def test_a_count_past_two_billion_is_kept(runtime):
    """At 1,000 refusals a second an endpoint passes 2**31 in 25 days: a 32-bit count
    would make every later write fail, and the counts would stop."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    now = runtime.clock()
    with runtime.ingest_connection() as connection:
        from hooklatch.endpoints.service import record_refusal

        record_refusal(connection, endpoint, "bad_signature", count=2**31 - 1, now=now)
        record_refusal(connection, endpoint, "bad_signature", count=5, now=now)
    assert refused(runtime, endpoint) == 2**31 + 4
