"""Load: Stripe-signed ~2 KB events, replayed by wrk (closed loop) or sent at a fixed rate."""

from __future__ import annotations

import gc
import http.client
import json
import os
import queue
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from stripe import WebhookSignature

from bench.procs import BenchError

LUA = Path(__file__).resolve().parent / "wrk" / "replay.lua"
SECRET = "whsec_bench_0123456789abcdef0123456789abcdef"


@dataclass(frozen=True)
class Signed:
    external_id: str
    signature: str
    body: bytes


def stripe_event(external_id: str, created: int) -> bytes:
    """An invoice.paid event of about 2 KB, shaped like Stripe's."""
    lines = [
        {
            "id": f"il_{external_id}_{n}",
            "object": "line_item",
            "amount": 1000 + n,
            "currency": "usd",
            "description": f"Seat licence, tier {n}, billed monthly",
            "period": {"start": created - 2_592_000, "end": created},
        }
        for n in range(6)
    ]
    payload = {
        "id": external_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "type": "invoice.paid",
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "data": {
            "object": {
                "id": f"in_{external_id}",
                "object": "invoice",
                "customer": "cus_bench0001",
                "amount_paid": sum(line["amount"] for line in lines),  # type: ignore[misc]
                "currency": "usd",
                "status": "paid",
                "lines": {"object": "list", "data": lines, "has_more": False},
            }
        },
    }
    return json.dumps(payload, separators=(", ", ": ")).encode()


def sign(external_id: str, *, secret: str = SECRET, now: int | None = None) -> Signed:
    stamp = int(time.time()) if now is None else now
    body = stripe_event(external_id, stamp)
    # stripe-python's own signing function (the one its test suite uses).
    digest = WebhookSignature._compute_signature(f"{stamp}.{body.decode()}", secret)
    return Signed(external_id, f"t={stamp},v1={digest}", body)


def stripe_endpoint(env: dict[str, str], name: str, *, ordering: str | None = None) -> str:
    """A Stripe endpoint whose secret is SECRET, in the database ``env`` names (with the
    benchmark handlers' tables beside it), and its ordering policy if given; its id."""
    from bench.handlers import metadata
    from hooklatch.assembly import build_runtime
    from hooklatch.endpoints.service import create_endpoint
    from hooklatch.ordering.service import set_ordering
    from hooklatch.settings import Settings

    runtime = build_runtime(Settings.from_env(env))
    metadata.create_all(runtime.engine)
    with runtime.session_factory.begin() as session:
        endpoint, _ = create_endpoint(
            session,
            provider=runtime.provider("stripe"),
            name=name,
            secrets=[SECRET],
            box=runtime.box,
        )
        if ordering is not None:
            set_ordering(session, endpoint, actor="bench", now=runtime.clock(), policy=ordering)
        endpoint_id = endpoint.id
    runtime.dispose()
    return endpoint_id


def signed_batch(prefix: str, count: int, *, secret: str = SECRET) -> list[Signed]:
    stamp = int(time.time())
    return [sign(f"evt_{prefix}_{n:08d}", secret=secret, now=stamp) for n in range(count)]


def write_requests(path: Path, url_path: str, items: list[Signed]) -> Path:
    with path.open("wb") as handle:
        for item in items:
            handle.write(f"{url_path}\t{item.signature}\t".encode() + item.body + b"\n")
    return path


@dataclass(frozen=True)
class WrkResult:
    requests: int
    seconds: float
    status_errors: int
    socket_errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    wrapped: int
    loadgen_cpu: float  # cores' worth of CPU that wrk itself used

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def as_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "seconds": round(self.seconds, 2),
            "rps": round(self.rps, 1),
            "p50_ms": self.p50_ms,
            "p90_ms": self.p90_ms,
            "p99_ms": self.p99_ms,
            "max_ms": self.max_ms,
            "non_2xx": self.status_errors,
            "socket_errors": self.socket_errors,
            "loadgen_cpu_cores": round(self.loadgen_cpu, 2),
        }


def wrk_path() -> str:
    found = shutil.which("wrk")
    if found is None:
        raise BenchError("wrk is not installed: apt-get install wrk (Debian) or brew install wrk")
    return found


def wrk_figures(process: subprocess.Popen[bytes]) -> tuple[dict[str, Any], Any]:
    """Wait for a wrk run of our Lua scripts: the JSON its BENCH line carries, and the
    resources it used."""
    _, status, usage = os.wait4(process.pid, 0)
    stdout = process.stdout.read().decode() if process.stdout else ""
    stderr = process.stderr.read().decode() if process.stderr else ""
    process.returncode = os.waitstatus_to_exitcode(status)
    lines = [line for line in stdout.splitlines() if line.startswith("BENCH ")]
    if process.returncode != 0 or not lines:
        raise BenchError(f"wrk failed ({process.returncode}): {stderr or stdout}")
    return json.loads(lines[-1][len("BENCH ") :]), usage


def run_wrk(
    base_url: str, requests_file: Path, *, connections: int, seconds: float, threads: int = 1
) -> WrkResult:
    args = [
        wrk_path(),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        base_url,
        "--",
        str(requests_file),
        str(threads),
    ]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    data, usage = wrk_figures(process)
    seconds = data["duration_us"] / 1e6
    return WrkResult(
        requests=data["requests"],
        seconds=seconds,
        status_errors=data["status_errors"],
        socket_errors=data["socket_errors"],
        p50_ms=data["p50_us"] / 1000,
        p90_ms=data["p90_us"] / 1000,
        p99_ms=data["p99_us"] / 1000,
        max_ms=data["max_us"] / 1000,
        wrapped=data["wrapped"],
        loadgen_cpu=(usage.ru_utime + usage.ru_stime) / seconds,
    )


@dataclass(frozen=True)
class OpenLoopResult:
    sent: int
    seconds: float
    failures: int
    response_p50_ms: float
    response_p99_ms: float
    # How late the sender itself began each request (its own scheduling, not the server's).
    start_lag_p99_ms: float
    # Each request's scheduled send time (Unix time) and response time (ms), in send order.
    samples: tuple[tuple[float, float], ...] = ()


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def open_loop(url: str, items: list[Signed], *, rate: float, senders: int = 16) -> OpenLoopResult:
    """Send each item at its own scheduled time (i / rate), whatever the answers' latency.

    Response time is measured from the scheduled time, so a slow server is not hidden
    by the sender waiting for it (no coordinated omission). The garbage collector is
    paused meanwhile: a full collection of this process's prepared requests stops every
    sender for tens of milliseconds, which would be counted as the server's latency.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _open_loop(url, items, rate=rate, senders=senders)
    finally:
        if collecting:
            gc.enable()


def _open_loop(url: str, items: list[Signed], *, rate: float, senders: int) -> OpenLoopResult:
    target = urlsplit(url)
    work: queue.Queue[tuple[float, Signed] | None] = queue.Queue()
    latencies: list[float] = []
    lags: list[float] = []
    samples: list[tuple[float, float]] = []
    # Scheduled times as Unix time too, to line requests up with another process's log.
    wall_offset = time.time() - time.monotonic()
    failures = 0
    lock = threading.Lock()

    def sender() -> None:
        nonlocal failures
        connection = http.client.HTTPConnection(target.hostname or "", target.port, timeout=10)
        while (job := work.get()) is not None:
            scheduled, item = job
            began = time.monotonic()
            try:
                connection.request(
                    "POST",
                    target.path,
                    body=item.body,
                    headers={
                        "Content-Type": "application/json",
                        "Stripe-Signature": item.signature,
                    },
                )
                response = connection.getresponse()
                response.read()
                ok = response.status == 200
                if response.getheader("connection", "").lower() == "close":
                    connection.close()
            except (OSError, http.client.HTTPException):
                connection.close()
                ok = False
            elapsed = time.monotonic() - scheduled
            with lock:
                latencies.append(elapsed * 1000)
                lags.append((began - scheduled) * 1000)
                samples.append((scheduled + wall_offset, elapsed * 1000))
                failures += 0 if ok else 1

    pool = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for thread in pool:
        thread.start()
    started = time.monotonic()
    for n, item in enumerate(items):
        scheduled = started + n / rate
        delay = scheduled - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        work.put((scheduled, item))
    for _ in pool:
        work.put(None)
    for thread in pool:
        thread.join()
    return OpenLoopResult(
        sent=len(items),
        seconds=time.monotonic() - started,
        failures=failures,
        response_p50_ms=percentile(latencies, 50),
        response_p99_ms=percentile(latencies, 99),
        start_lag_p99_ms=percentile(lags, 99),
        samples=tuple(sorted(samples)),
    )
