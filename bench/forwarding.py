"""Forwarding to each kind of destination (http, nats, rabbitmq, redis) under load built as
production builds it, against the same client library publishing straight to the same
broker; and a destination's rate limit beside ingest and handlers at full speed.

For each kind, on a fresh database: the Procfile's processes (gunicorn, `hooklatch relay`,
one `hooklatch worker`, no handler: events are "ignored", and forwarded all the same); a
Stripe endpoint and one destination of the kind, both made through the admin API. The
http kind's destination is ``bench.receiver``, a plain asyncio server in a process of its
own that answers 204 at once (so hooklatch's forwarding is what is measured, not a
receiver's work; it shares the machine's cores all the same). Unique Stripe-signed events
are sent over HTTP at a steady open-loop rate (bench.load): a warm-up, not measured; a
**steady** run above what the forwarder takes, so that it is kept busy; and a
**latency** run at a rate it keeps up with. From the database afterwards, per run:

- forwards/s: forwards delivered ÷ (the first forward's created_at → the last
  delivered_at); beside it the rate forwards were written at (the worker's), and how far
  the forwarder was behind at the end, which say whether the forwarder set the pace;
- added latency: delivered_at - created_at (written in the event's processing
  transaction → acknowledged by the destination), p50 and p99;
- checks that fail the run: each event stored, with exactly one forward, delivered; the
  destination, read back, holds every key. Repeats (a forward's attempts past its first,
  a key the destination holds twice) are reported.

Then the **baselines** (bench.baselines.direct_publish), after hooklatch's processes have
stopped: the steady run's bodies and headers published straight to a fresh stream, queue
or receiver, with the library hooklatch uses, in a plain loop (and, where hooklatch sends
a pass's forwards at once, the concurrent form of that loop too). Ratio = hooklatch's
steady forwards/s ÷ the baseline's messages/s.

**Rate limit**: one redis destination limited to 50 forwards a second while events arrive
at 300 a second, a handler writing one row per event (bench.handlers.write): the most
entries the stream took in any one second (by their ids, Redis's own clock; more than the
limit fails the run), and the ingest and handler drain rates beside it against the same
load before the destination was added, in the same processes.

`python -m bench.forwarding [--smoke] [--kind KIND ...]` prints the figures (and, in a full
run of every kind, writes them to bench/results/<date>-forwarding.json). Smoke runs fail
only on a check, never on a figure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import click
import redis
import requests

from bench import load
from bench.baselines.direct_publish import BASELINES
from bench.handlers import metadata
from bench.plans import Sized, sized
from bench.procs import (
    BIN,
    ROOT,
    BenchError,
    Procs,
    cpu_seconds,
    flush_redis,
    free_port,
    psql,
    scratch_database,
    wait_http,
    wait_until,
)
from bench.scenarios import Bench, Plan, finish, head_commit, results_head
from hooklatch.assembly import build_runtime
from hooklatch.events.identity import idempotency_key
from hooklatch.forwarding.message import Message
from hooklatch.settings import Settings
from tests.support.forwarding import jetstream, rabbit_queue, redis_stream, signing_secret

KINDS = ("http", "nats", "rabbitmq", "redis")
REDIS_URL = "redis://127.0.0.1:6379/8"  # the job queue's; destinations' streams are in 0
TOKEN = "bench-admin-token-5c1e8f0a27d94b63"
LIMITED_HANDLERS = "bench.handlers.write"
RECEIVER = "bench.receiver: one asyncio process, answers 204 at once, no verification"


@dataclass(frozen=True)
class ForwardingPlan(Sized):
    warmup_events: int = sized(100, smoke=20)
    # The steady run: sent faster than the forwarder takes them, to keep it busy.
    events: int = sized(4000, smoke=200)
    rate: float = sized(1000, smoke=400)
    # The latency run: a rate every kind's forwarder keeps up with.
    latency_events: int = sized(1000, smoke=100)
    latency_rate: float = sized(150, smoke=100)
    # The rate limit: forwards a second, against events arriving this fast, for so long.
    limit: float = 50
    limited_arrivals: float = 300
    limited_seconds: float = sized(10, smoke=3)
    limited_warmup_seconds: float = sized(3, smoke=1)


# -- destinations: where forwards go, and what they hold afterwards ----------------------------


@dataclass
class Target:
    """A destination's settings, what it holds (each message's key, in its order), and the
    process that serves it when it is ours (the http receiver)."""

    settings: dict[str, str]
    keys: Callable[[], list[str]]
    pid: int | None = None


@contextmanager
def target(kind: str, work_dir: Path) -> Iterator[Target]:
    """A fresh destination of ``kind``: a stream, queue or receiver of its own."""
    if kind == "http":
        with Procs(work_dir) as procs:
            port = free_port()
            receiver = procs.start(
                f"receiver-{port}", [str(BIN / "python"), "-m", "bench.receiver", str(port)], {}
            )
            base = f"http://127.0.0.1:{port}"
            wait_http(f"{base}/keys", receiver)

            def received() -> list[str]:
                return requests.get(f"{base}/keys", timeout=30).text.splitlines()

            settings = {"url": f"{base}/forwarded", "signing_secret": signing_secret()}
            yield Target(settings, received, receiver.pid)
        return
    helpers: dict[str, Callable[[], AbstractContextManager[Any]]] = {
        "nats": jetstream,
        "rabbitmq": rabbit_queue,
        "redis": redis_stream,
    }
    with helpers[kind]() as (settings, read):
        yield Target(settings, lambda: read().keys)


# -- processes, on a fresh database ---------------------------------------------------------


@contextmanager
def fresh_bench(smoke: bool) -> Iterator[Bench]:
    """A Bench on a new database of BENCH_PG_ADMIN_URL's server, its schema migrated, and
    its job queue's Redis database emptied; the database is dropped afterwards."""
    admin_url = os.environ.get(
        "BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    with (
        tempfile.TemporaryDirectory(prefix="hooklatch-bench-") as scratch,
        scratch_database(admin_url) as database_url,
    ):
        redis_url = os.environ.get("BENCH_REDIS_URL", REDIS_URL)
        bench = Bench(Plan.for_run(smoke), database_url, redis_url, Path(scratch))
        flush_redis(redis_url)
        upgrade = [str(BIN / "hooklatch"), "db", "upgrade"]
        subprocess.run(upgrade, env=bench.env(), check=True, cwd=ROOT, capture_output=True)
        yield bench


def admin(base_url: str, path: str, body: dict[str, Any], status: int) -> dict[str, Any]:
    """POST to the admin API, as an operator's script would; its answer's JSON."""
    answer = requests.post(
        f"{base_url}/admin/{path}",
        json=body,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    if answer.status_code != status:
        raise BenchError(f"POST /admin/{path}: {answer.status_code} {answer.text}")
    found: dict[str, Any] = answer.json()
    return found


def stripe_endpoint(base_url: str) -> str:
    made = admin(
        base_url,
        "endpoints",
        {"provider": "stripe", "name": "bench", "secrets": [load.SECRET]},
        201,
    )
    return str(made["id"])


def add_destination(
    base_url: str, kind: str, settings: dict[str, str], endpoint_id: str, **extra: Any
) -> str:
    body = {"name": f"bench-{kind}", "kind": kind, "settings": settings, **extra}
    made = admin(base_url, "destinations", {**body, "filter": {"endpoint": endpoint_id}}, 201)
    return str(made["id"])


THIS_PROCESS = "bench (load sender, polls)"


def cpu_of(pids: dict[str, int]) -> dict[str, float]:
    """Each process's CPU seconds so far; this one's own only (the others are its
    children)."""
    own = os.times()
    return {
        **{name: cpu_seconds(pid) for name, pid in pids.items()},
        THIS_PROCESS: own.user + own.system,
    }


def pids_of(procs: Procs, receiver: int | None) -> dict[str, int]:
    pids = {proc.name: proc.pid for proc in procs.running}
    if receiver is not None:
        pids["receiver"] = receiver
    return pids


# -- one kind ---------------------------------------------------------------------------------

ROWS = (
    "SELECT e.external_id, f.status, f.attempts, extract(epoch FROM f.created_at), "
    "extract(epoch FROM f.delivered_at) FROM events e LEFT JOIN forwards f ON f.event_id = e.id "
    "WHERE e.external_id LIKE %s"
)
WRITTEN = (
    "SELECT count(*) FROM forwards f JOIN events e ON e.id = f.event_id WHERE e.external_id LIKE %s"
)
DELIVERED = (
    "SELECT count(*) FROM forwards f JOIN events e ON e.id = f.event_id "
    "WHERE e.external_id LIKE %s AND f.status = 'delivered'"
)


@dataclass
class Run:
    """One run's events as sent, how they were sent, and the CPU each process used."""

    name: str
    items: list[load.Signed]
    sent: load.OpenLoopResult
    cpu: dict[str, float]
    seconds: float
    backlog: bool = False  # sent while the destination was paused, then resumed


def forwarded_run(
    bench: Bench, procs: Procs, url: str, name: str, count: int, rate: float, pids: dict[str, int]
) -> Run:
    """``count`` events sent at ``rate``, once every one's forward is delivered."""
    items = load.signed_batch(name, count)
    before, started = cpu_of(pids), time.monotonic()
    sent = load.open_loop(url, items, rate=rate)
    if sent.failures:
        raise BenchError(f"{name}: {sent.failures} of {count} events not answered 200")

    def delivered() -> bool:
        procs.check_alive()
        return int(psql(bench.database_url, DELIVERED, (f"evt_{name}_%",))[0][0]) >= count

    wait_until(delivered, timeout=60 + count / 50, what=f"{name}: {count} forwards delivered")
    after, seconds = cpu_of(pids), time.monotonic() - started
    cpu = {process: round(after[process] - before[process], 2) for process in after}
    return Run(name, items, sent, cpu, seconds)


def backlog_run(
    bench: Bench,
    procs: Procs,
    base_url: str,
    url: str,
    destination: str,
    plan: ForwardingPlan,
    kind: str,
    pids: dict[str, int],
    profile: Path | None,
) -> Run:
    """The destination paused through the admin API while ``plan.events`` events are sent
    and processed (their forwards written, waiting); then resumed: the forwarder alone,
    with nothing else to do beside it, until every one is delivered."""
    name = f"{kind}backlog"
    admin(base_url, f"destinations/{destination}/pause", {}, 200)
    items = load.signed_batch(name, plan.events)
    sent = load.open_loop(url, items, rate=plan.rate)
    if sent.failures:
        raise BenchError(f"{name}: {sent.failures} of {plan.events} events not answered 200")

    def written() -> bool:
        procs.check_alive()
        return int(psql(bench.database_url, WRITTEN, (f"evt_{name}_%",))[0][0]) >= plan.events

    wait_until(written, timeout=60 + plan.events / 50, what=f"{name}: forwards written")
    before, started = cpu_of(pids), time.monotonic()

    def delivered() -> bool:
        procs.check_alive()
        return int(psql(bench.database_url, DELIVERED, (f"evt_{name}_%",))[0][0]) >= plan.events

    with profiled(pids["relay"], profile / f"{kind}-relay.txt" if profile else None):
        admin(base_url, f"destinations/{destination}/resume", {}, 200)
        wait_until(delivered, timeout=60 + plan.events / 50, what=f"{name}: forwards delivered")
    after, seconds = cpu_of(pids), time.monotonic() - started
    cpu = {process: round(after[process] - before[process], 2) for process in after}
    return Run(name, items, sent, cpu, seconds, backlog=True)


@contextmanager
def profiled(pid: int, path: Path | None) -> Iterator[None]:
    """py-spy recording ``pid`` while the block runs, every thread, idle time included
    (raw collapsed stacks, one line per stack, into ``path``); nothing if ``path`` is None."""
    if path is None:
        yield
        return
    args = ["record", "--pid", str(pid), "--rate", "200", "--threads", "--idle"]
    spy = subprocess.Popen(
        [str(BIN / "py-spy"), *args, "--format", "raw", "--output", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)  # attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(30)


def run_kind(
    kind: str,
    plan: ForwardingPlan,
    smoke: bool,
    log: Callable[[str], None],
    profile: Path | None = None,
) -> dict:
    with fresh_bench(smoke) as bench, target(kind, bench.work_dir) as dest:
        server = bench.hooklatch(workers=1, HOOKLATCH_ADMIN_TOKEN=TOKEN)
        with server as (procs, base_url):
            endpoint_id = stripe_endpoint(base_url)
            destination = add_destination(base_url, kind, dest.settings, endpoint_id)
            url, pids = f"{base_url}/hooks/{endpoint_id}", pids_of(procs, dest.pid)
            forwarded_run(bench, procs, url, f"{kind}warm", plan.warmup_events, 100, pids)
            steady = forwarded_run(bench, procs, url, f"{kind}steady", plan.events, plan.rate, pids)
            log(f"  {kind}: steady run forwarded; the latency run")
            latency = forwarded_run(
                bench, procs, url, f"{kind}latency", plan.latency_events, plan.latency_rate, pids
            )
            log(f"  {kind}: the backlog run (destination paused, then resumed)")
            backlog = backlog_run(
                bench, procs, base_url, url, destination, plan, kind, pids, profile
            )
        held = Counter(dest.keys())
        runs = {
            run.name: checked_figures(bench, run, endpoint_id, held, kind)
            for run in (steady, latency, backlog)
        }
    log(f"  {kind}: baselines")
    messages = [message_of(item, endpoint_id) for item in steady.items]
    figures: dict[str, Any] = {
        "steady": runs[steady.name],
        "latency": runs[latency.name],
        "backlog": runs[backlog.name],
        "destination_repeats": sum(n - 1 for n in held.values() if n > 1),
        "baselines": baselines(kind, messages),
    }
    ours = figures["steady"]["forwards_per_second"]
    alone = figures["backlog"]["after_first_pass_per_second"]
    for baseline in figures["baselines"].values():
        baseline["ratio"] = round(ours / baseline["per_second"], 3)
        baseline["backlog_ratio"] = round(alone / baseline["per_second"], 3)
    return figures


def checked_figures(
    bench: Bench, run: Run, endpoint_id: str, held: Counter[str], kind: str
) -> dict[str, Any]:
    """A run's checks (each event stored, forwarded once and delivered, its key at the
    destination), then its figures."""
    rows = psql(bench.database_url, ROWS, (f"evt_{run.name}_%",))
    expected = {item.external_id for item in run.items}
    stored = Counter(str(row[0]) for row in rows)
    where = f"{kind} {run.name}"
    if set(stored) != expected:
        raise BenchError(f"{where}: {len(expected)} events sent, {len(stored)} stored")
    if doubled := [ext for ext, n in stored.items() if n != 1]:
        raise BenchError(f"{where}: {len(doubled)} events with more than one forward")
    if undelivered := [row for row in rows if row[1] != "delivered"]:
        raise BenchError(f"{where}: {len(undelivered)} forwards not delivered: {undelivered[:3]}")
    keys = {idempotency_key(endpoint_id, ext, "") for ext in expected}
    if missing := keys - set(held):
        raise BenchError(f"{where}: the destination lacks {len(missing)} of {len(keys)} keys")
    created = [float(row[3]) for row in rows]
    delivered = [float(row[4]) for row in rows]
    return {
        **figures_of(run, created, delivered),
        "resent": sum(int(row[2]) - 1 for row in rows),
        "destination_repeats": sum(held[k] - 1 for k in keys if held[k] > 1),
        "cpu_seconds": run.cpu,
        "seconds": round(run.seconds, 2),
    }


def figures_of(run: Run, created: list[float], delivered: list[float]) -> dict[str, Any]:
    """Rates and latencies of a run's forwards (created_at and delivered_at, Unix time)."""
    added = [(d - c) * 1000 for c, d in zip(created, delivered, strict=True)]
    n = len(created)
    figures = {
        "events": n,
        "sent_per_second": round(run.sent.sent / run.sent.seconds, 1),
        "response_p99_ms": round(run.sent.response_p99_ms, 1),
        "written_per_second": round(n / max(1e-6, max(created) - min(created)), 1),
        "forwards_per_second": round(n / (max(delivered) - min(created)), 1),
        "behind_at_end_ms": round((max(delivered) - max(created)) * 1000, 1),
        "most_waiting": most_waiting(created, delivered),
        "added_latency_ms": {
            "p50": round(load.percentile(added, 50), 1),
            "p99": round(load.percentile(added, 99), 1),
            "max": round(max(added), 1),
        },
    }
    if run.backlog:
        # delivered_at is a pass's: the forwards after the first pass, over the time from
        # the first pass's acknowledgement to the last's.
        figures["after_first_pass_per_second"] = after_first_pass(delivered)
    return figures


def after_first_pass(times: Sequence[float]) -> float:
    """Forwards a second after the first pass of a sender: those acknowledged later than
    0.1 s after it, over the time from it to the last."""
    first, last = min(times), max(times)
    later = sum(1 for t in times if t > first + 0.1)
    return round(later / max(1e-6, last - first), 1)


def most_waiting(created: Sequence[float], delivered: Sequence[float]) -> int:
    """The most forwards written and not yet delivered at any one moment."""
    changes = sorted([(t, 1) for t in created] + [(t, -1) for t in delivered])
    waiting = most = 0
    for _, change in changes:
        waiting += change
        most = max(most, waiting)
    return most


def message_of(item: load.Signed, endpoint_id: str) -> Message:
    """A steady run's event as hooklatch forwarded it, for the baselines."""
    return Message(
        forward_id=0,
        key=idempotency_key(endpoint_id, item.external_id, ""),
        event_id=item.external_id,
        type="invoice.paid",
        provider="stripe",
        endpoint_id=endpoint_id,
        received_at=datetime.now(UTC),
        ordering_key=None,
        body=item.body,
        content_type="application/json",
    )


def baselines(kind: str, messages: list[Message]) -> dict[str, Any]:
    """Each of the kind's baselines, on a destination of its own."""
    found = {}
    with tempfile.TemporaryDirectory(prefix="hooklatch-bench-") as scratch:
        for name, (what, publish) in BASELINES[kind].items():
            with target(kind, Path(scratch)) as dest:
                secret = dest.settings.get("signing_secret", "")
                rate = publish(dest.settings, messages, secret)
            found[name] = {"what": what, "messages": len(messages), "per_second": round(rate, 1)}
    return found


# -- a rate limit beside ingest and handlers -------------------------------------------------

HANDLED = (
    "SELECT extract(epoch FROM received_at), extract(epoch FROM processed_at) FROM events "
    "WHERE external_id LIKE %s AND status = 'processed'"
)


def handled_run(bench: Bench, procs: Procs, url: str, name: str, count: int, rate: float) -> dict:
    """``count`` events sent at ``rate`` to the write handler; once every one is processed,
    how fast they came in and were handled."""
    items = load.signed_batch(name, count)
    sent = load.open_loop(url, items, rate=rate)
    if sent.failures:
        raise BenchError(f"{name}: {sent.failures} of {count} events not answered 200")
    rows: list[tuple[Any, ...]] = []

    def handled() -> bool:
        procs.check_alive()
        rows[:] = psql(bench.database_url, HANDLED, (f"evt_{name}_%",))
        return len(rows) >= count

    wait_until(handled, timeout=60 + count / 50, what=f"{name}: {count} events processed")
    received = [float(row[0]) for row in rows]
    processed = [float(row[1]) for row in rows]
    waits = [(p - r) * 1000 for r, p in zip(received, processed, strict=True)]
    return {
        "events": count,
        "sent_per_second": round(sent.sent / sent.seconds, 1),
        "response_p50_ms": round(sent.response_p50_ms, 1),
        "response_p99_ms": round(sent.response_p99_ms, 1),
        "handled_per_second": round(count / (max(processed) - min(received)), 1),
        "stored_to_processed_p50_ms": round(load.percentile(waits, 50), 1),
        "stored_to_processed_p99_ms": round(load.percentile(waits, 99), 1),
    }


def most_in_a_second(times: Sequence[float]) -> int:
    """The most of ``times`` (seconds) in any window [t, t + 1)."""
    ordered = sorted(times)
    most = start = 0
    for end, at in enumerate(ordered):
        while ordered[start] <= at - 1.0:
            start += 1
        most = max(most, end - start + 1)
    return most


def run_limited(plan: ForwardingPlan, smoke: bool, log: Callable[[str], None]) -> dict:
    count = round(plan.limited_arrivals * plan.limited_seconds)
    with fresh_bench(smoke) as bench, redis_stream() as (settings, _):
        runtime = build_runtime(Settings.from_env(bench.env()))
        metadata.create_all(runtime.engine)  # the write handler's table
        runtime.dispose()
        server = bench.hooklatch(workers=1, handlers=LIMITED_HANDLERS, HOOKLATCH_ADMIN_TOKEN=TOKEN)
        with server as (procs, base_url):
            endpoint_id = stripe_endpoint(base_url)
            url = f"{base_url}/hooks/{endpoint_id}"
            warmup = round(plan.limited_arrivals * plan.limited_warmup_seconds)
            handled_run(bench, procs, url, "limwarm", warmup, plan.limited_arrivals)
            log(f"  rate limit: {count} events at {plan.limited_arrivals:g}/s, no destination")
            alone = handled_run(bench, procs, url, "alone", count, plan.limited_arrivals)
            destination = add_destination(
                base_url, "redis", settings, endpoint_id, rate_limit=plan.limit
            )
            wait_until(
                lambda: bool(
                    psql(
                        bench.database_url,
                        "SELECT lease_owner FROM destinations WHERE id = %s",
                        (destination,),
                    )[0][0]
                ),
                timeout=30,
                what="the relay to take the destination",
            )
            log(f"  rate limit: the same beside a redis destination limited to {plan.limit:g}/s")
            beside = handled_run(bench, procs, url, "beside", count, plan.limited_arrivals)
        handler_runs = psql(
            bench.database_url,
            "SELECT count(*), count(DISTINCT event_id), (SELECT count(*) FROM events) "
            "FROM bench_effects",
        )[0]
        delivered_at = [
            float(row[0])
            for row in psql(
                bench.database_url,
                "SELECT extract(epoch FROM delivered_at) FROM forwards WHERE status = 'delivered'",
            )
        ]
        client = redis.Redis.from_url(settings["url"])
        entries = cast(list[tuple[bytes, Any]], client.xrange(settings["stream"]))
        client.close()
    if not handler_runs[0] == handler_runs[1] == handler_runs[2]:
        raise BenchError(f"rate limit: {handler_runs[0]} handler runs for {handler_runs[2]} events")
    # An entry's id starts with the milliseconds of Redis's clock when it was added.
    taken = [int(entry_id.split(b"-")[0]) / 1000 for entry_id, _ in entries]
    if not taken:
        raise BenchError("rate limit: the destination took nothing")
    at_destination = most_in_a_second(taken)
    if at_destination > plan.limit:
        raise BenchError(
            f"rate limit: the destination took {at_destination} entries within one second, "
            f"past the limit of {plan.limit:g}"
        )
    return {
        "limit_per_second": plan.limit,
        "arrivals_per_second": plan.limited_arrivals,
        "most_in_any_second_at_destination": at_destination,
        "most_in_any_second_by_delivered_at": most_in_a_second(delivered_at),
        "forwarded": len(taken),
        "forwarded_per_second": after_first_pass(taken),
        "alone": alone,
        "beside": beside,
        "ratios": {
            name: round(beside[name] / alone[name], 3)
            for name in ("sent_per_second", "handled_per_second", "stored_to_processed_p99_ms")
        },
    }


# -- the command ---------------------------------------------------------------------------------


def summary(figures: dict[str, Any]) -> list[str]:
    lines = []
    for kind, found in figures["kinds"].items():
        steady, latency = found["steady"], found["latency"]
        lines.append(
            f"{kind}: {steady['forwards_per_second']:,}/s forwarded (written at "
            f"{steady['written_per_second']:,}/s, {steady['behind_at_end_ms']:,} ms behind at "
            f"the end, at most {steady['most_waiting']:,} waiting); added p50 / p99 "
            f"{latency['added_latency_ms']['p50']} / {latency['added_latency_ms']['p99']} ms at "
            f"{latency['sent_per_second']:g}/s (steady run: {steady['added_latency_ms']['p50']} "
            f"/ {steady['added_latency_ms']['p99']} ms); repeats: {steady['resent']} resent, "
            f"{found['destination_repeats']} held twice"
        )
        lines.append(
            f"  backlog (paused, then resumed: the forwarder alone): "
            f"{found['backlog']['after_first_pass_per_second']:,}/s after its first pass"
        )
        for name, baseline in found["baselines"].items():
            lines.append(
                f"  baseline {name} ({baseline['what']}): {baseline['per_second']:,}/s; "
                f"hooklatch ÷ baseline: steady {baseline['ratio']}, backlog "
                f"{baseline['backlog_ratio']}"
            )
    if limited := figures.get("rate_limit"):
        ratios = limited["ratios"]
        lines.append(
            f"rate limit {limited['limit_per_second']:g}/s, events at "
            f"{limited['arrivals_per_second']:g}/s: at most "
            f"{limited['most_in_any_second_at_destination']} entries in any second at the "
            f"destination ({limited['most_in_any_second_by_delivered_at']} by delivered_at), "
            f"{limited['forwarded_per_second']}/s forwarded; beside it ÷ alone: ingest "
            f"{ratios['sent_per_second']}, handled {ratios['handled_per_second']}, stored → "
            f"processed p99 {ratios['stored_to_processed_p99_ms']}"
        )
    return lines


@click.command()
@click.option("--smoke", is_flag=True, help="A few hundred events a kind: checks, not figures.")
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(KINDS),
    help="Only this kind (repeatable), and no rate limit run; nothing is kept.",
)
@click.option(
    "--profile",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Record the relay with py-spy during each backlog run, into DIR/<kind>-relay.txt.",
)
def main(smoke: bool, kinds: tuple[str, ...], profile: Path | None) -> None:
    plan = ForwardingPlan.for_run(smoke)
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    figures: dict[str, Any] = {"receiver": RECEIVER, "kinds": {}}
    try:
        for kind in kinds or KINDS:
            click.echo(f"forwarding to {kind}")
            figures["kinds"][kind] = run_kind(kind, plan, smoke, click.echo, profile)
        if not kinds:
            click.echo("forwarding with a rate limit")
            figures["rate_limit"] = run_limited(plan, smoke, click.echo)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    results = {
        **results_head(smoke, load_before),
        "commit": head_commit(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "plan": asdict(plan),
        "figures": figures,
    }
    finish(results, summary(figures), name="forwarding", smoke=smoke or bool(kinds))


if __name__ == "__main__":
    main()
