"""`hooklatch relay` and `hooklatch worker` started while PostgreSQL is away: each says so
in one line per retry, with growing waits, and does its work once the database answers
(the worker takes no job before)."""

import re
from dataclasses import replace
from urllib.parse import urlsplit

import pytest

from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    retry_waits,
    with_port,
    worker_runs_an_event,
)
from tests.support.proxy import TcpProxy

SECRET = "whsec_test_secret"
RETRY = re.compile(r"relay pass failed \((\w+): (.*)\), retrying in ([\d.]+) s$")


class Database:
    """PostgreSQL behind a port that answers only once started (a TCP proxy to it)."""

    def __init__(self, settings) -> None:
        self.port = free_port()
        self.target = ("127.0.0.1", urlsplit(settings.database_url).port or 5432)
        self.url = with_port(settings.database_url, self.port)
        self.proxy: TcpProxy | None = None

    def start(self) -> None:
        self.proxy = TcpProxy(self.target, self.port)

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()


def started_away(procs, settings, command: str, says: str, times: int):
    """``hooklatch <command>`` started while its database is away; returns once it has
    said ``says`` ``times`` times, still running, one log line per record."""
    database = Database(settings)
    env = process_env(replace(settings, database_url=database.url))
    proc = procs(command, hooklatch_cmd(command), env)
    wait_for(
        lambda: proc.log().count(says) >= times,
        timeout=30,
        message=f"{command} saying {times} times that it cannot reach the database",
    )
    assert proc.popen.poll() is None, proc.log()
    retry_waits(proc.log(), says, times)
    return proc, database


@pytest.mark.slow
def test_a_relay_started_while_postgresql_is_away_waits_for_it_then_relays(
    procs, proc_settings, runtime, client
):
    relay, database = started_away(procs, proc_settings, "relay", "relay pass failed", 3)
    log = relay.log()
    lines = [line for line in log.splitlines() if "relay pass failed" in line]
    retries = [match for line in lines if (match := RETRY.search(line))]
    assert len(retries) == len(lines), log
    assert {match[1] for match in retries} == {"OperationalError"}
    assert all("Connection refused" in match[2] for match in retries), log
    # Its cleanup and heartbeat threads say once that they wait too, not at every retry.
    assert log.count("cleanup pass failed") == 1, log
    assert log.count("heartbeat failed") == 1, log

    try:
        database.start()
        endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
        deliver(client, endpoint, "evt_relay_waited")
        wait_for(
            lambda: count(runtime, "SELECT count(*) FROM outbox WHERE job_id IS NOT NULL") == 1,
            timeout=30,
            message=f"the event handed to a job by the relay that waited\n{relay.log()}",
        )
        relay.stops_on_sigterm()
    finally:
        database.stop()


@pytest.mark.slow
def test_a_worker_started_while_postgresql_is_away_takes_no_job_until_it_answers(
    procs, proc_settings, runtime, client
):
    worker, database = started_away(procs, proc_settings, "worker", "database unreachable", 2)
    assert not listening(worker)

    try:
        database.start()
        wait_for(lambda: listening(worker), timeout=30, message="worker listening")
        procs("relay", hooklatch_cmd("relay"), process_env(proc_settings))
        worker_runs_an_event(client, runtime, worker, "evt_worker_waited_for_pg")
        worker.stops_on_sigterm()
    finally:
        database.stop()


@pytest.mark.slow
def test_sigterm_stops_a_worker_waiting_for_postgresql(procs, proc_settings):
    away = replace(proc_settings, database_url=Database(proc_settings).url)
    worker = procs("worker", hooklatch_cmd("worker"), process_env(away))
    wait_for(lambda: "database unreachable" in worker.log(), timeout=30, message="waiting")
    worker.stops_on_sigterm(timeout=5)


@pytest.mark.slow
def test_a_burst_worker_with_an_empty_queue_ends_whether_or_not_postgresql_answers(
    procs, proc_settings
):
    away = replace(proc_settings, database_url=Database(proc_settings).url)
    worker = procs("worker", [*hooklatch_cmd("worker"), "--burst"], process_env(away))
    assert worker.popen.wait(timeout=20) == 0, worker.log()
    assert "database unreachable" not in worker.log()
