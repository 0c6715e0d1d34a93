"""Slow clients (headers sent, then one body byte every 2 s) do not stop the receiver, and
neither does a client that keeps its connection busy."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bench.slow_clients import SlowClients
from tests.support.database import stored_for
from tests.support.http import PATIENCE, timed, timed_delivery
from tests.support.install import ROOT
from tests.support.pipeline import make_endpoint
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    start_procfile_web,
    wait_http,
)
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


@pytest.mark.slow
def test_procfile_web_answers_signed_deliveries_while_fifty_clients_trickle(
    procs, proc_settings, runtime
):
    base, _, web = start_procfile_web(procs, proc_settings)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    url = f"{base}/hooks/{endpoint}"

    with SlowClients(url, 50) as slow:
        time.sleep(1)  # every slow client reaches a worker before the deliveries start
        answers = [timed_delivery(url, f"evt_slow_clients_{n:02d}", SECRET) for n in range(10)]
        held = slow.held()

    assert [status for status, _ in answers] == [200] * 10, (answers, web.log()[-3000:])
    assert max(seconds for _, seconds in answers) < PATIENCE
    assert held == 50  # the slow clients were still there throughout
    assert stored_for(runtime, endpoint) == 10
    assert "HTTP parser: gunicorn_h1c (C)" in web.log()


@pytest.mark.slow
def test_a_request_waiting_on_postgresql_lets_the_same_worker_answer_others(
    procs, proc_settings, runtime
):
    """One gevent worker: psycopg2 must wait through gevent's hub, not block the worker."""
    base, _, web = start_procfile_web(procs, proc_settings, WEB_CONCURRENCY="1")
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])

    with ThreadPoolExecutor(1) as pool, runtime.engine.connect() as locker:
        locker.exec_driver_sql("LOCK TABLE endpoints IN ACCESS EXCLUSIVE MODE")
        waiting = pool.submit(
            timed_delivery, f"{base}/hooks/{endpoint}", "evt_waits_for_lock", SECRET
        )
        time.sleep(1)  # the delivery is waiting for the lock
        health = timed("GET", base + "/healthz")
        locker.rollback()
        delivered = waiting.result()

    assert health[0] == 200, (health, web.log()[-3000:])  # answered while the lock was held
    assert delivered[0] == 200
    assert stored_for(runtime, endpoint) == 1


class Pipeliner:
    """One kept-alive connection that sends ``count`` requests at once (HTTP/1.1
    pipelining) when told to, and reads their answers as they come."""

    def __init__(self, port: int, path: str, count: int) -> None:
        body = stripe_event("evt_pipelined")
        headers = {**stripe_headers(body, "whsec_not_the_endpoints_secret"), "Host": "x"}
        head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        )
        self.count = count
        self.answered = 0
        self.statuses: set[bytes] = set()
        self.requests = request * count
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def send(self) -> Pipeliner:
        threading.Thread(target=self.sock.sendall, args=(self.requests,), daemon=True).start()
        return self

    def _read(self) -> None:
        answers = self.sock.makefile("rb")
        while self.answered < self.count:
            status = answers.readline().split(b" ")[1:2]
            length = 0
            while (line := answers.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if not status or len(answers.read(length)) != length:
                return  # the connection was closed
            self.statuses.add(status[0])
            self.answered += 1

    def close(self) -> None:
        self.sock.close()


@pytest.mark.slow
def test_clients_pipelining_requests_do_not_hold_their_worker(procs, proc_settings, runtime):
    """One gevent worker. 20 connections each send 50 bad-signature requests at once (as
    many as a connection may carry), so that a greenlet never has to wait for its next
    one. Without taking turns, each kept the worker for all of its 50, and a delivery sent
    meanwhile on another kept-alive connection waited behind most of the 1,000; it is
    answered while they are still being refused."""
    _, port, web = start_procfile_web(procs, proc_settings, WEB_CONCURRENCY="1")
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    path = f"/hooks/{endpoint}"
    # The first refusals of an endpoint are checked again against the database (a wait
    # that lets other greenlets run); after them, a refusal waits for nothing.
    first = Pipeliner(port, path, 10).send()
    first.reader.join(timeout=60)
    first.close()
    good = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    good.request("GET", "/healthz")  # accepted: its greenlet waits for the next request
    assert good.getresponse().read()
    body = stripe_event("evt_beside_pipeline")
    floods = [Pipeliner(port, path, 50) for _ in range(20)]

    def answered() -> int:
        return sum(flood.answered for flood in floods)

    try:
        time.sleep(0.2)  # every connection is accepted
        for flood in floods:
            flood.send()
        deadline = time.monotonic() + 30
        while answered() < 1:  # the worker is busy with the pipelined requests
            assert time.monotonic() < deadline, web.log()[-3000:]
            time.sleep(0.001)
        good.request("POST", path, body=body, headers=stripe_headers(body, SECRET))
        delivered = good.getresponse()
        delivered.read()
        answered_by_then = answered()
        for flood in floods:
            flood.reader.join(timeout=60)
    finally:
        for flood in floods:
            flood.close()
        good.close()

    assert delivered.status == 200, web.log()[-3000:]
    assert answered_by_then < 500, answered_by_then
    assert {(flood.answered, frozenset(flood.statuses)) for flood in floods} == {
        (50, frozenset({b"401"}))
    }
    assert stored_for(runtime, endpoint) == 1


@pytest.mark.slow
def test_a_kept_alive_connection_is_closed_after_fifty_requests(procs, proc_settings):
    """Connections opened at the same moment land unevenly on the gevent workers and stay
    there; closing each after 50 requests lets the idler workers take them back."""
    _, port, _ = start_procfile_web(procs, proc_settings)
    client = http.client.HTTPConnection("127.0.0.1", port, timeout=PATIENCE)
    closing = []
    for n in range(1, 101):
        client.request("GET", "/healthz")
        answer = client.getresponse()
        answer.read()
        assert answer.status == 200
        if answer.getheader("Connection", "").lower() == "close":
            closing.append(n)
            client.close()  # the next request opens a new connection
    client.close()
    assert closing == [50, 100]


@pytest.mark.slow
def test_serve_answers_health_and_a_signed_delivery_while_clients_trickle(procs, tmp_path):
    port = free_port()
    # The embedded default: nothing configured, SQLite under the folder it starts in.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HOOKLATCH_", "DATABASE_", "REDIS_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    serve = procs("serve", hooklatch_cmd("serve", "--port", str(port)), env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", serve, timeout=120)
    added = subprocess.run(
        [
            *hooklatch_cmd(
                "endpoints", "add", "stripe", "--name", "slow", "--secret", SECRET, "--json"
            )
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    url = f"{base}/hooks/{json.loads(added.stdout)['id']}"

    with SlowClients(url, 8):
        time.sleep(1)
        health = timed("GET", base + "/healthz")
        delivery = timed_delivery(url, "evt_serve_slow_clients", SECRET)

    assert health[0] == 200 and health[1] < PATIENCE, (health, serve.log()[-3000:])
    assert delivery[0] == 200 and delivery[1] < PATIENCE, (delivery, serve.log()[-3000:])
