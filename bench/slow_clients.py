"""Slow clients: connections that send a request's headers, then one body byte every 2 s.

Each one ties up whatever reads its body until the body is complete, which at that pace
is never. This module holds them open for the suite (tests/integration/test_slow_clients.py)
and for this scenario, which runs, in one go, for gunicorn's sync workers (what the
Procfile ran before) and for the shipped default (gevent):

- ingest of unique events as scenario 1 of docs/benchmarks.md measures it (wrk, 16
  connections, pre-signed Stripe requests, the relay running), and the ratio;
- the web workers' CPU time per unique event, which the machine's other load moves much
  less than it moves throughput;
- with 50 slow clients held open, how many of 10 signed deliveries are answered 200
  within 10 s (a provider's patience), and how long each took.

`python -m bench.slow_clients [--smoke]` prints the figures.
"""

from __future__ import annotations

import os
import select
import socket
import statistics
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import click
import requests

from bench import load
from bench.plans import Sized, sized
from bench.procs import BenchError, psql, scalar
from bench.scenarios import Bench, Plan, echo_figures, prepared_bench


class SlowClients:
    """``count`` connections to ``url``, each a POST whose body arrives a byte at a time.

    Used as a context manager: the connections are open, their headers sent, when it is
    entered, and closed when it is left. ``held()`` tells how many the server still
    holds (neither answered nor closed).
    """

    def __init__(
        self, url: str, count: int, *, interval: float = 2.0, body_bytes: int = 1000
    ) -> None:
        parts = urlsplit(url)
        self.address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.head = (
            f"POST {parts.path or '/'} HTTP/1.1\r\n"
            f"Host: {parts.netloc}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {body_bytes}\r\n\r\n"
        ).encode()
        self.count = count
        self.interval = interval
        self.body_bytes = body_bytes
        self.sockets: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._trickle, daemon=True)

    def __enter__(self) -> SlowClients:
        for _ in range(self.count):
            sock = socket.create_connection(self.address, timeout=5)
            sock.sendall(self.head)
            self.sockets.append(sock)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.sockets:
            sock.close()

    def held(self) -> int:
        """Connections the server has neither answered nor closed."""
        readable, _, _ = select.select(self.sockets, [], [], 0)
        return len(self.sockets) - len(readable)

    def _trickle(self) -> None:
        sent = 0
        while not self._stop.wait(self.interval) and sent < self.body_bytes - 1:
            for sock in self.sockets:
                with suppress(OSError):  # closed by the server: held() counts it out
                    sock.send(b" ")
            sent += 1


@dataclass(frozen=True)
class SlowPlan(Sized):
    """How many slow clients are held open, and the deliveries sent meanwhile."""

    slow_clients: int = 50
    deliveries: int = sized(10, smoke=3)
    # A provider waits this long for an answer (Stripe and GitHub: 10 s).
    patience: float = sized(10.0, smoke=3.0)


# Each measured worker class, and the GUNICORN_WORKER_CLASS that runs it: empty leaves
# gunicorn.conf.py its own choice, the shipped default.
WORKER_CLASSES = {"sync": "sync", "gevent": ""}
# A Redis database of its own: the harness empties it between runs.
REDIS_URL = "redis://127.0.0.1:6379/13"


class PeakConnections:
    """The most connections the database had open at once while this was running."""

    def __init__(self, database_url: str, interval: float = 0.2) -> None:
        self.database_url = database_url
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PeakConnections:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            count = scalar(
                self.database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()",
            )
            self.peak = max(self.peak, int(count))


def web_cpu_per_request(bench: Bench, name: str, worker_class: str) -> dict[str, Any]:
    """CPU time the web workers spend per unique event, from their own counters.

    Throughput on a shared machine moves with everything else running on it; the CPU a
    worker spends on a request moves much less, so this compares the worker classes'
    own cost. wrk sends unique events as in scenario 1, after a warm-up.
    """
    plan = bench.plan
    pool = plan.max_rps * int(plan.ingest_seconds)
    bench.reset()
    with bench.hooklatch(GUNICORN_WORKER_CLASS=worker_class) as (procs, base_url):
        workers = _children(procs.running[0].pid)
        for label, count, seconds in (
            ("warmup", pool // 2, plan.warmup_seconds),
            ("unique", pool, plan.ingest_seconds),
        ):
            path = load.write_requests(
                bench.work_dir / f"cpu-{name}-{label}.req",
                bench.hook_path,
                load.signed_batch(f"cpu{name}{label}", count),
            )
            before = _cpu_seconds(workers)
            result = load.run_wrk(
                base_url + bench.hook_path, path, connections=plan.connections, seconds=seconds
            )
            spent = _cpu_seconds(workers) - before
            path.unlink()
        procs.check_alive()
        if result.status_errors or result.socket_errors:
            raise BenchError(f"cpu {name}: requests refused or cut off")
    cpu_ms = round(1000 * spent / result.requests, 3)
    bench.log(f"  {name}: {cpu_ms} ms of web worker CPU per unique event, {result.rps:,.0f} req/s")
    return {"rps": round(result.rps, 1), "web_cpu_ms_per_request": cpu_ms}


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def _cpu_seconds(pids: list[int]) -> float:
    """User and system CPU time of these processes so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def deliveries_while_held(
    bench: Bench, name: str, plan: SlowPlan, worker_class: str
) -> dict[str, Any]:
    """gunicorn as the Procfile runs it, ``plan.slow_clients`` slow clients held open, and
    ``plan.deliveries`` signed deliveries sent one after another meanwhile."""
    bench.reset()
    with bench.hooklatch(GUNICORN_WORKER_CLASS=worker_class) as (procs, base_url):
        url = base_url + bench.hook_path
        seconds: list[float] = []
        answered = 0
        with SlowClients(url, plan.slow_clients) as slow:
            time.sleep(1)  # every slow client has reached the server
            for n in range(plan.deliveries):
                item = load.sign(f"evt_held_{name}_{n:04d}")
                headers = {"Content-Type": "application/json", "Stripe-Signature": item.signature}
                started = time.monotonic()
                try:
                    ok = requests.post(
                        url, data=item.body, headers=headers, timeout=plan.patience
                    ).ok
                except requests.RequestException:
                    ok = False
                seconds.append(time.monotonic() - started)
                answered += ok
            held = slow.held()
        procs.check_alive()
    result = {
        "slow_clients": plan.slow_clients,
        "slow_clients_still_held": held,
        "deliveries": plan.deliveries,
        "answered_200": answered,
        "patience_seconds": plan.patience,
        "p50_ms": round(1000 * load.percentile(seconds, 50), 1),
        "max_ms": round(1000 * max(seconds), 1),
    }
    bench.log(
        f"  {name}, {plan.slow_clients} slow clients: {answered} of {plan.deliveries} "
        f"answered 200 within {plan.patience:.0f} s, p50 {result['p50_ms']} ms, "
        f"max {result['max_ms']} ms"
    )
    return result


def run(bench: Bench, plan: SlowPlan, rounds: int = 1) -> dict[str, Any]:
    """Both measurements for each worker class, in one go, on a prepared ``bench``.

    Ingest runs ``rounds`` times per class, the classes taking turns, so that a change in
    the machine's load during the run weighs on both; the ratio is of the medians.
    """
    results: dict[str, Any] = {name: {"ingest": []} for name in WORKER_CLASSES}
    for n in range(rounds):
        for name, worker_class in WORKER_CLASSES.items():
            bench.log(f"{name}, round {n + 1} of {rounds}")
            server = bench.hooklatch(GUNICORN_WORKER_CLASS=worker_class)
            with PeakConnections(bench.database_url) as connections:
                ingest = bench.ingest(f"slow-{name}-{n}", server, bench.stored_hooklatch)
            ingest["peak_database_connections"] = connections.peak
            results[name]["ingest"].append(ingest)
            results[name].setdefault("cpu", []).append(
                web_cpu_per_request(bench, f"{name}-{n}", worker_class)
            )
    for name, worker_class in WORKER_CLASSES.items():
        results[name]["held"] = deliveries_while_held(bench, name, plan, worker_class)
    sync, gevent = (_median_rps(results[name]["ingest"]) for name in ("sync", "gevent"))
    results["unique_ingest_ratio_gevent_to_sync"] = round(gevent / sync, 3)
    sync, gevent = (
        statistics.median(cpu["web_cpu_ms_per_request"] for cpu in results[name]["cpu"])
        for name in ("sync", "gevent")
    )
    results["web_cpu_per_request_ratio_gevent_to_sync"] = round(gevent / sync, 3)
    return results


def _median_rps(runs: list[dict[str, Any]]) -> float:
    return statistics.median(run["unique"]["rps"] for run in runs)


def summary(results: dict[str, Any]) -> list[str]:
    lines = []
    for name in WORKER_CLASSES:
        for ingest in results[name]["ingest"]:
            unique = ingest["unique"]
            lines.append(
                f"{name:>6}: unique ingest {unique['rps']:,.0f} req/s (p50 "
                f"{unique['p50_ms']:.1f} ms, p99 {unique['p99_ms']:.1f} ms); web worker peak "
                f"RSS {ingest['web_worker_peak_rss_mb']} MB; peak database connections "
                f"{ingest['peak_database_connections']}"
            )
        for cpu in results[name]["cpu"]:
            lines.append(
                f"{name:>6}: {cpu['web_cpu_ms_per_request']} ms of web worker CPU per unique "
                f"event (at {cpu['rps']:,.0f} req/s)"
            )
        held = results[name]["held"]
        lines.append(
            f"{name:>6}: with {held['slow_clients']} slow clients, {held['answered_200']} of "
            f"{held['deliveries']} deliveries answered 200 (p50 {held['p50_ms']} ms, max "
            f"{held['max_ms']} ms)"
        )
    lines.append(
        f"gevent ÷ sync, unique ingest (medians): {results['unique_ingest_ratio_gevent_to_sync']}"
    )
    lines.append(
        "gevent ÷ sync, web worker CPU per unique event (medians): "
        f"{results['web_cpu_per_request_ratio_gevent_to_sync']}"
    )
    return lines


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per run: checks, not figures.")
@click.option("--rounds", default=1, show_default=True, help="Ingest runs per worker class.")
@click.option(
    "--no-commit-wait",
    is_flag=True,
    help="synchronous_commit off in the scratch database: commits do not wait for the disk, "
    "so ingest measures the web process's CPU rather than the disk's flush time.",
)
def main(smoke: bool, rounds: int, no_commit_wait: bool) -> None:
    plan, slow = Plan.for_run(smoke), SlowPlan.for_run(smoke)
    with prepared_bench(plan, REDIS_URL) as bench:
        if no_commit_wait:
            name = bench.database_url.rsplit("/", 1)[-1]
            psql(bench.database_url, f'ALTER DATABASE "{name}" SET synchronous_commit TO off')
        results = run(bench, slow, rounds)
    echo_figures(results, summary(results))


if __name__ == "__main__":
    main()
