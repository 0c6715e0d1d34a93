"""`hooklatch relay` and `hooklatch worker` started while PostgreSQL is away: each says so
in one line per retry, with growing waits, and does its work once the database answers
(the worker takes no job before)."""

import re
import signal
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.processes import free_port, hooklatch_cmd, process_env, with_port
from tests.support.proxy import TcpProxy
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
RETRY = re.compile(r"relay pass failed \((\w+): (.*)\), retrying in ([\d.]+) s$")


@pytest.mark.slow
def test_a_relay_started_while_postgresql_is_away_waits_for_it_then_relays(
    procs, proc_settings, runtime, client
):
    port = free_port()
    settings = replace(proc_settings, database_url=with_port(proc_settings.database_url, port))
    relay = procs("relay", hooklatch_cmd("relay"), process_env(settings))
    wait_for(
        lambda: relay.log().count("relay pass failed") >= 3,
        timeout=30,
        message="the relay saying three times that it cannot reach the database",
    )
    assert relay.popen.poll() is None, relay.log()
    log = relay.log()
    assert "Traceback" not in log
    # One line per retry: each line of the log is a record of its own.
    assert all(re.match(r"\d{4}-\d\d-\d\d ", line) for line in log.splitlines()), log
    lines = [line for line in log.splitlines() if "relay pass failed" in line]
    retries = [match for line in lines if (match := RETRY.search(line))]
    assert len(retries) == len(lines), log
    assert {match[1] for match in retries} == {"OperationalError"}
    assert all("Connection refused" in match[2] for match in retries), log
    waits = [float(match[3]) for match in retries]
    assert waits == sorted(waits) and waits[-1] > waits[0], waits

    proxy = TcpProxy(("127.0.0.1", urlsplit(proc_settings.database_url).port or 5432), port)
    try:
        endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
        body = stripe_event("evt_relay_waited")
        answer = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
        assert answer.status_code == 200
        wait_for(
            lambda: count(runtime, "SELECT count(*) FROM outbox WHERE job_id IS NOT NULL") == 1,
            timeout=30,
            message=f"the event handed to a job by the relay that waited\n{relay.log()}",
        )
        relay.popen.send_signal(signal.SIGTERM)
        assert relay.popen.wait(timeout=15) == 0, relay.log()
    finally:
        proxy.stop()


@pytest.mark.slow
def test_a_worker_started_while_postgresql_is_away_takes_no_job_until_it_answers(
    procs, proc_settings, runtime, client
):
    port = free_port()
    away = replace(proc_settings, database_url=with_port(proc_settings.database_url, port))
    worker = procs("worker", hooklatch_cmd("worker"), process_env(away))
    wait_for(
        lambda: worker.log().count("database unreachable") >= 2,
        timeout=30,
        message="the worker saying twice that it cannot reach the database",
    )
    log = worker.log()
    assert worker.popen.poll() is None, log
    assert "Traceback" not in log and "Listening on" not in log, log
    assert all(re.match(r"\d{4}-\d\d-\d\d ", line) for line in log.splitlines()), log

    proxy = TcpProxy(("127.0.0.1", urlsplit(proc_settings.database_url).port or 5432), port)
    try:
        wait_for(lambda: "Listening on" in worker.log(), timeout=30, message="worker listening")
        procs("relay", hooklatch_cmd("relay"), process_env(proc_settings))
        endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
        body = stripe_event("evt_worker_waited_for_pg", event_type="effect.waited")
        answer = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
        assert answer.status_code == 200
        wait_for(
            lambda: count(runtime, "SELECT count(*) FROM test_effects") == 1,
            timeout=30,
            message=f"the event processed by the worker that waited\n{worker.log()}",
        )
        worker.popen.send_signal(signal.SIGTERM)
        assert worker.popen.wait(timeout=15) == 0, worker.log()
    finally:
        proxy.stop()


@pytest.mark.slow
def test_sigterm_stops_a_worker_waiting_for_postgresql(procs, proc_settings):
    port = free_port()
    away = replace(proc_settings, database_url=with_port(proc_settings.database_url, port))
    worker = procs("worker", hooklatch_cmd("worker"), process_env(away))
    wait_for(lambda: "database unreachable" in worker.log(), timeout=30, message="waiting")
    worker.popen.send_signal(signal.SIGTERM)
    assert worker.popen.wait(timeout=5) == 0, worker.log()


@pytest.mark.slow
def test_a_burst_worker_with_an_empty_queue_ends_whether_or_not_postgresql_answers(
    procs, proc_settings
):
    away = replace(proc_settings, database_url=with_port(proc_settings.database_url, free_port()))
    worker = procs("worker", [*hooklatch_cmd("worker"), "--burst"], process_env(away))
    assert worker.popen.wait(timeout=20) == 0, worker.log()
    assert "database unreachable" not in worker.log()
