"""Per-entity ordering under load built as production builds it: Stripe-signed events
arrive through gunicorn over HTTP (never inserted by SQL), a relay hands them out, and two
`hooklatch worker` processes run them.

A. **Unkeyed throughput with the ordering code and without it.** "Without" is the code at
   ``BASELINE`` (the last commit before ordering), "with" is HEAD: each checked out in a
   git worktree of its own and installed without dependencies into a virtualenv of its
   own, which reuses this one's installed (locked) dependencies through a .pth file. The
   same gunicorn, C parser, SQLAlchemy and psycopg2 builds serve both sides, and their
   processes run in this checkout (wsgi.py, gunicorn.conf.py and bench.handlers are
   unchanged since the baseline): only hooklatch differs. A probe run with each side's
   interpreter, environment and working directory checks which hooklatch they import (the
   baseline's has no ``hooklatch.workers.worker.keyed``). Both run on this checkout's
   schema: the old code ignores the new columns. Each run is an outage: gunicorn and the
   relay, no worker, a wrk burst of unique events to an endpoint whose ordering is none
   (ingest req/s); then two workers start and drain the backlog (events ÷ worker start →
   last processed). Current and baseline runs alternate, in pairs whose order alternates
   too (A B B A A B ...); medians, and current ÷ baseline for the drain and for ingest.
B. **A hot key drains at handler speed.** An endpoint with ordering fifo; 1,000 events of
   one customer (the key) sent at a steady open-loop rate above the handler's speed while
   two workers run, and again as a burst during an outage, the workers started after it.
   The handler (``bench.handlers.timed``) sleeps 5 ms and writes one row with its own start
   and end. Handler speed = 1 ÷ its median recorded time; the key's drain rate = events ÷
   (first start → last finish); their ratio. From the recorded times: no two runs of the
   key overlapped, and they ran in id order. As references in the same run, the same 1,000
   events spread over 1,000 keys, and sent to an endpoint whose ordering is none, with two
   workers and with one: a key runs in one worker at a time, so what one worker makes of
   the handler unkeyed (its claim, attempt row and savepoint included) is the speed a hot
   key can reach, and the hot key's drain ÷ that one worker's is what ordering costs it.

Every run checks that each event ran its handler exactly once, and that every request
was answered 200. `python -m bench.ordering [--smoke]` prints the figures (and, in full
mode, writes them to bench/results/<date>-ordering.json). Smoke runs skip the baseline,
measure this checkout as it is (its editable install) with small counts, and fail only on
an event lost, doubled, out of order or overlapping another of its key, or a request not
answered 200, never on figures.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import click
from stripe import WebhookSignature

from bench import arrivals, load
from bench.arrivals import ArrivalsPlan
from bench.plans import Sized, sized
from bench.procs import BIN, ROOT, BenchError, Proc, Procs, free_port, psql, wait_http
from bench.scenarios import (
    Bench,
    Plan,
    _wait_children,
    echo_figures,
    finish,
    keep_results,
    prepared_bench,
    results_head,
)

BASELINE = "144e242"  # the last commit before per-entity ordering
REDIS_URL = "redis://127.0.0.1:6379/14"
UNKEYED_HANDLERS = arrivals.HANDLERS  # one bench_effects row per event: a double fails
TIMED_HANDLERS = "bench.handlers.timed"
HOT, SPREAD, UNKEYED = "hot_key", "spread_keys", "unkeyed"
ONE_WORKER = "unkeyed_one_worker"  # what one worker makes of the handler: a key's ceiling
STEADY, OUTAGE = "steady", "outage"


@dataclass(frozen=True)
class OrderingPlan(Sized):
    # A: this many runs of each side, in pairs (current first in every other pair), each
    # an outage as bench.arrivals builds it (its burst, workers, clear timeout, settling).
    pairs: int = sized(6, smoke=1)
    # (Frozen: one instance can be every plan's.)
    arrivals: ArrivalsPlan = sized(ArrivalsPlan(), smoke=ArrivalsPlan.for_run(True))  # noqa: RUF009
    baseline: bool = sized(True, smoke=False)
    # B: one key's events, and the handler's fixed cost.
    key_events: int = sized(1000, smoke=100)
    handler_seconds: float = 0.005
    # Above one key's handler speed (1 ÷ 5 ms, less the handler's insert), so that the key
    # always has work waiting, and about what two workers can run; well within ingest.
    steady_rate: float = 250
    # The outage's burst: as fast as gunicorn answers the open-loop sender.
    outage_rate: float = 2000


# -- the code under test: a commit installed on its own, or this checkout ----------------------


@dataclass(frozen=True)
class Side:
    """The hooklatch a run's processes import: a virtualenv's. Every side's processes run
    in this checkout, with it on PYTHONPATH (wsgi.py, gunicorn.conf.py and bench.handlers,
    unchanged since the baseline), so that only hooklatch differs between sides."""

    name: str
    commit: str
    python: Path
    home: Path  # where its hooklatch must be imported from
    has_ordering: bool

    @property
    def hooklatch(self) -> str:
        return str(self.python.parent / "hooklatch")


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise BenchError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout.strip()


def run_quietly(args: list[str], what: str, **kwargs: Any) -> str:
    done = subprocess.run(args, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode:
        raise BenchError(f"{what} failed ({done.returncode}):\n{done.stderr or done.stdout}")
    return done.stdout


def checkout_side() -> Side:
    """This checkout as it is (its editable install), uncommitted changes included."""
    return Side("current", git("rev-parse", "--short", "HEAD"), BIN / "python", ROOT, True)


@contextmanager
def installed_side(name: str, commit: str, *, has_ordering: bool) -> Iterator[Side]:
    """``commit`` checked out in a git worktree under a temporary directory and installed
    from it (not editable, no dependencies) into a virtualenv of its own, whose .pth file
    adds this virtualenv's site-packages but not the .pth files there (this checkout's
    editable hooklatch): the locked dependencies, the very builds, are reused. Removed
    afterwards."""
    commit = git("rev-parse", "--short", commit)
    with tempfile.TemporaryDirectory(prefix=f"hooklatch-{name}-") as scratch:
        src, venv = Path(scratch) / "src", Path(scratch) / "venv"
        git("worktree", "add", "--detach", str(src), commit)
        try:
            run_quietly([sys.executable, "-m", "venv", "--without-pip", str(venv)], "venv")
            python = venv / "bin" / "python"
            purelib = run_quietly(
                [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                f"the {name} virtualenv's site-packages",
            ).strip()
            reused = sysconfig.get_paths()["purelib"]
            (Path(purelib) / "bench-reused-dependencies.pth").write_text(reused + "\n")
            pip = [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation"]
            run_quietly(
                [*pip, "--ignore-installed", "--no-index", str(src)], f"installing {commit}"
            )
            yield Side(name, commit, python, venv, has_ordering)
        finally:
            git("worktree", "remove", "--force", str(src))


@contextmanager
def sides(
    baseline: str | None, *, baseline_has_ordering: bool
) -> Iterator[tuple[Side, Side | None]]:
    """Full runs: HEAD and the ``baseline`` commit, each installed from its commit
    (uncommitted edits in this checkout are not measured). Smoke runs (no baseline): this
    checkout."""
    if baseline is None:
        yield checkout_side(), None
        return
    with (
        installed_side("current", "HEAD", has_ordering=True) as current,
        installed_side("baseline", baseline, has_ordering=baseline_has_ordering) as old,
    ):
        yield current, old


def both_sides(current: Side, baseline: Side | None) -> list[Side]:
    return [current] if baseline is None else [current, baseline]


def in_pairs(current: Side, baseline: Side | None, pairs: int) -> Iterator[tuple[int, Side]]:
    """Each side once in each of ``pairs`` pairs, whose order alternates (current then
    baseline, baseline then current, ...), so that neither always runs first."""
    both = both_sides(current, baseline)
    for n in range(pairs):
        for side in both if n % 2 == 0 else both[::-1]:
            yield n, side


PROBE = """
import importlib.util, json, hooklatch
keyed = importlib.util.find_spec("hooklatch.workers.worker.keyed") is not None
print(json.dumps({"file": hooklatch.__file__, "keyed": keyed}))
"""


def check_imports(bench: Bench, side: Side) -> dict[str, Any]:
    """Which hooklatch a process of this side imports, run with the interpreter, the
    environment and the working directory of its gunicorn, relay and workers: the side's
    own, with the ordering code (hooklatch.workers.worker.keyed) or, at the baseline,
    without it."""
    found = json.loads(
        run_quietly(
            [str(side.python), "-c", PROBE],
            f"the {side.name} import probe",
            cwd=ROOT,
            env=bench.env(HOOKLATCH_HANDLERS=UNKEYED_HANDLERS),
        )
    )
    where = Path(found["file"]).resolve()
    if found["keyed"] != side.has_ordering or not where.is_relative_to(side.home.resolve()):
        raise BenchError(f"{side.name} processes import the wrong hooklatch: {found}")
    return {"commit": side.commit, "hooklatch": str(where), "has_ordering": found["keyed"]}


@contextmanager
def servers(
    bench: Bench, side: Side, handlers: str, *, workers: int = 0, **extra: str
) -> Iterator[tuple[Procs, str]]:
    """gunicorn (as the Procfile runs it) and one relay of this side's code, and workers."""
    env = bench.env(HOOKLATCH_HANDLERS=handlers, **extra)
    with Procs(bench.work_dir) as procs:
        web, base_url = start_web(procs, side, env)
        bench.web_workers = _wait_children(web.pid)
        procs.start(f"{side.name}-relay", [side.hooklatch, "relay"], env)
        start_workers(procs, side, env, workers)
        yield procs, base_url


def start_web(procs: Procs, side: Side, env: dict[str, str]) -> tuple[Proc, str]:
    """gunicorn of this side's code, as the Procfile runs it, answering; its base URL."""
    port = free_port()
    web = procs.start(
        f"{side.name}-web",
        [str(side.python), "-m", "gunicorn", "wsgi:app", "-c", "gunicorn.conf.py"],
        {**env, "HOST": "127.0.0.1", "PORT": str(port)},
    )
    base_url = f"http://127.0.0.1:{port}"
    wait_http(base_url + "/healthz", web)
    return web, base_url


def start_workers(procs: Procs, side: Side, env: dict[str, str], count: int) -> None:
    for n in range(count):
        procs.start(f"{side.name}-worker-{n}", [side.hooklatch, "worker"], env)


# -- A: unkeyed throughput, current against baseline -------------------------------------------


def unkeyed_outage(bench: Bench, plan: OrderingPlan, side: Side, name: str) -> dict[str, Any]:
    """A wrk burst with no worker running, then two workers drain what it left."""
    bench.reset()
    with servers(bench, side, UNKEYED_HANDLERS) as (procs, base_url):
        ingest, _ = arrivals.burst(bench, plan.arrivals, name, base_url)
        time.sleep(1)  # a request wrk cut off may commit after it returns; a relay pass
        stored, keyed, rows = (
            int(x)
            for x in psql(
                bench.database_url,
                "SELECT count(*), count(ordering_key), (SELECT count(*) FROM outbox) FROM events",
            )[0]
        )
        arrivals.check_stored(name, ingest.requests, stored, plan.arrivals.connections)
        if keyed or rows != stored:
            raise BenchError(f"{name}: {stored} events, {keyed} keyed, {rows} outbox rows")
        workers_started = time.time()
        env = bench.env(HOOKLATCH_HANDLERS=UNKEYED_HANDLERS)
        start_workers(procs, side, env, plan.arrivals.workers)
        arrivals.drained(bench, procs, plan.arrivals.clear_timeout_seconds, name)
    times = arrivals.check_once(bench, name)
    sizes = arrivals.finished_job_sizes(bench)
    wall = times["last_processed"] - workers_started
    span = times["last_processed"] - times["first_processed"]
    result = {
        "side": side.name,
        "commit": side.commit,
        "ingest": ingest.as_json(),
        "stored": stored,
        "job_shape": arrivals.job_shape(sizes),
        "drain_seconds_from_worker_start": round(wall, 2),
        "drain_events_per_second": arrivals.rate(stored, wall),
        "drain_events_per_second_processed_at_span": arrivals.rate(stored - 1, span),
    }
    bench.log(
        f"  {name} ({side.name} {side.commit}): ingest {ingest.rps:,.0f} req/s, "
        f"{stored:,} events; drain {result['drain_events_per_second']:,}/s from worker start"
    )
    return result


# The figures compared, each a path into a run's result.
FIGURES = {
    "drain_events_per_second": ("drain_events_per_second",),
    "drain_events_per_second_processed_at_span": ("drain_events_per_second_processed_at_span",),
    "ingest_rps": ("ingest", "rps"),
}


def figure(run: dict[str, Any], path: tuple[str, ...]) -> float:
    value: Any = run
    for step in path:
        value = value[step]
    return float(value)


def compare(runs: list[dict[str, Any]], figures: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """Medians of each side, current ÷ baseline of the medians, and of each pair: of each
    of ``figures`` (its name, and its path into a run's result)."""
    by_side = {
        side: [run for run in runs if run["side"] == side] for side in ("current", "baseline")
    }
    result: dict[str, Any] = {
        side: {
            "runs": len(mine),
            **{
                name: round(statistics.median(figure(run, path) for run in mine), 1)
                for name, path in figures.items()
            },
        }
        for side, mine in by_side.items()
        if mine
    }
    if "baseline" not in result:
        return result
    result["ratios"] = {
        name: round(result["current"][name] / result["baseline"][name], 3) for name in figures
    }
    pairs = [
        {name: round(figure(a, path) / figure(b, path), 3) for name, path in figures.items()}
        for a, b in zip(by_side["current"], by_side["baseline"], strict=True)
    ]
    result["pair_ratios"] = pairs
    result["pair_ratio_medians"] = {
        name: round(statistics.median(pair[name] for pair in pairs), 3) for name in figures
    }
    return result


# -- B: one key's events at handler speed -----------------------------------------------------


def signed_events(prefix: str, count: int, customer: Callable[[int], str]) -> list[load.Signed]:
    """load's invoice.paid events, each of the customer given, Stripe-signed."""
    stamp = int(time.time())
    items = []
    for n in range(count):
        external_id = f"evt_{prefix}_{n:08d}"
        body = load.stripe_event(external_id, stamp)
        body = body.replace(b'"cus_bench0001"', json.dumps(customer(n)).encode())
        digest = WebhookSignature._compute_signature(f"{stamp}.{body.decode()}", load.SECRET)
        items.append(load.Signed(external_id, f"t={stamp},v1={digest}", body))
    return items


def fifo_endpoint(bench: Bench) -> str:
    """A second Stripe endpoint, with ordering fifo (its key: data.object.customer)."""
    return load.stripe_endpoint(bench.env(), "bench-fifo", ordering="fifo")


@dataclass(frozen=True)
class Run:
    """One run of the handler, with its own times and the worker's attempt's."""

    event_id: int
    key: str | None
    customer: str
    pid: int
    started: float
    finished: float
    attempt_started: float
    attempt_finished: float


def timed_runs(bench: Bench, name: str, events: int, layout: str) -> list[Run]:
    """Each event processed, its handler run once; the events keyed as the layout says."""
    row = psql(
        bench.database_url,
        """SELECT (SELECT count(*) FROM events),
                  (SELECT count(*) FROM events WHERE status = 'processed'),
                  (SELECT count(*) FROM attempts),
                  (SELECT count(*) FROM bench_timed_runs),
                  (SELECT count(DISTINCT event_id) FROM bench_timed_runs),
                  (SELECT count(DISTINCT ordering_key) FROM events),
                  (SELECT count(ordering_key) FROM events)""",
    )[0]
    stored, processed, attempts, rows, distinct, keys, keyed = (int(x) for x in row)
    if not events == stored == processed == attempts == rows == distinct:
        raise BenchError(
            f"{name}: {events} sent, {stored} stored, {processed} processed, {attempts} "
            f"attempts, {rows} handler runs of {distinct} events: each must run exactly once"
        )
    expected = {HOT: (1, events), SPREAD: (events, events)}.get(layout, (0, 0))
    if (keys, keyed) != expected:
        raise BenchError(f"{name}: {keyed} of {events} events keyed, with {keys} keys")
    found = psql(
        bench.database_url,
        """SELECT r.event_id, e.ordering_key, r.customer, r.pid, r.started_at, r.finished_at,
                  extract(epoch FROM a.started_at), extract(epoch FROM a.finished_at)
           FROM bench_timed_runs r JOIN events e ON e.id = r.event_id
           JOIN attempts a ON a.event_id = r.event_id ORDER BY r.started_at""",
    )
    runs = [Run(int(a), b, c, int(d), *(float(x) for x in rest)) for a, b, c, d, *rest in found]
    if any(run.key is not None and run.key != run.customer for run in runs):
        raise BenchError(f"{name}: an event's key is not its customer")
    return runs


def check_key_order(name: str, runs: list[Run]) -> dict[str, Any]:
    """Within each key, by start: ids ascending, and each run (the handler's own, and the
    worker's attempt around it) ending before the next one starts. The gaps between the
    runs of the busiest key, and how many processes ran it."""
    by_key: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        if run.key is not None:
            by_key[run.key].append(run)
    for key, seq in by_key.items():
        for before, after in pairwise(seq):
            if after.event_id < before.event_id:
                raise BenchError(f"{name}: key {key} ran {after.event_id} after {before.event_id}")
            if after.started < before.finished or after.attempt_started < before.attempt_finished:
                raise BenchError(
                    f"{name}: key {key}: events {before.event_id} and {after.event_id} overlapped"
                )
    busiest = max(by_key.values(), key=len, default=[])
    gaps = [after.started - before.finished for before, after in pairwise(busiest)]
    return {
        "keys": len(by_key),
        "busiest_key_events": len(busiest),
        "busiest_key_processes": len({run.pid for run in busiest}),
        "gap_p50_ms": round(1000 * load.percentile(gaps, 50), 2) if gaps else None,
        "gap_p99_ms": round(1000 * load.percentile(gaps, 99), 2) if gaps else None,
        "gap_max_ms": round(1000 * max(gaps), 1) if gaps else None,
    }


def key_drain(
    bench: Bench,
    plan: OrderingPlan,
    side: Side,
    endpoints: dict[str, str],
    arrival: str,
    layout: str,
    *,
    analyze: bool = False,
) -> dict[str, Any]:
    """``key_events`` events sent at a steady rate to running workers, or in an outage's
    burst with the workers started after it (with ``analyze``, once ANALYZE has given
    the planner the backlog's statistics); their handler runs, checked and timed."""
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_timed_runs RESTART IDENTITY")
    name, n, steady = f"{arrival} {layout}", plan.key_events, arrival == STEADY
    name += " (analyzed)" * analyze
    one = layout == HOT
    items = signed_events(f"{arrival}-{layout}", n, lambda i: "cus_hot" if one else f"cus_{i:06d}")
    endpoint = endpoints["fifo" if layout in (HOT, SPREAD) else UNKEYED]
    extra = {"BENCH_HANDLER_SECONDS": repr(plan.handler_seconds)}
    count = 1 if layout == ONE_WORKER else plan.arrivals.workers
    running = count if steady else 0
    with servers(bench, side, TIMED_HANDLERS, workers=running, **extra) as (procs, base_url):
        if steady:
            time.sleep(
                plan.arrivals.settle_seconds
            )  # the relay and the workers up before the clock
        rate = plan.steady_rate if steady else plan.outage_rate
        sent = load.open_loop(f"{base_url}/hooks/{endpoint}", items, rate=rate)
        if sent.failures:
            raise BenchError(f"{name}: {sent.failures} requests were not answered 200")
        workers_started = None
        if not steady:
            time.sleep(1)  # requests in flight committed; a relay pass
            if analyze:
                psql(bench.database_url, "ANALYZE events")
            workers_started = time.time()
            env = bench.env(HOOKLATCH_HANDLERS=TIMED_HANDLERS, **extra)
            start_workers(procs, side, env, count)
        arrivals.drained(bench, procs, plan.arrivals.clear_timeout_seconds, name)
    runs = timed_runs(bench, name, n, layout)
    order = check_key_order(name, runs)
    return key_figures(bench, plan, name, runs, order, sent, workers_started)


def key_figures(
    bench: Bench,
    plan: OrderingPlan,
    name: str,
    runs: list[Run],
    order: dict[str, Any],
    sent: load.OpenLoopResult,
    workers_started: float | None,
) -> dict[str, Any]:
    first = min(run.started for run in runs)
    last = max(run.finished for run in runs)
    handler = statistics.median(run.finished - run.started for run in runs)
    drain = len(runs) / (last - first)
    # The process that ran the most of them, over its own first start → last finish:
    # what one worker makes of the handler's speed, keyed or not.
    by_pid: dict[int, list[Run]] = defaultdict(list)
    for run in runs:
        by_pid[run.pid].append(run)
    busiest = max(by_pid.values(), key=len)
    alone = len(busiest) / (max(r.finished for r in busiest) - min(r.started for r in busiest))
    result = {
        "events": len(runs),
        "sent_per_second": round(sent.sent / sent.seconds, 1),
        "response_p99_ms": round(sent.response_p99_ms, 1),
        "handler_median_ms": round(1000 * handler, 3),
        "handler_speed_per_second": round(1 / handler, 1),
        "drain_seconds": round(last - first, 3),
        "drain_events_per_second": round(drain, 1),
        # Drain rate ÷ handler speed: the share of the span the handler was running.
        "drain_over_handler_speed": round(drain * handler, 3),
        "drain_over_nominal_handler_speed": round(drain * plan.handler_seconds, 3),
        "processes": len(by_pid),
        "busiest_process_events": len(busiest),
        "busiest_process_over_handler_speed": round(alone * handler, 3),
        "seconds_from_worker_start": (
            None if workers_started is None else round(last - workers_started, 3)
        ),
        **order,
    }
    where = (
        f"its largest gap {result['gap_max_ms']} ms"
        if order["busiest_key_events"] > 1
        else f"{result['processes']} processes ran them"
    )
    bench.log(
        f"  {name}: {result['drain_events_per_second']:,}/s over {result['drain_seconds']} s, "
        f"handler {result['handler_median_ms']} ms (÷ handler speed "
        f"{result['drain_over_handler_speed']}; one process: "
        f"{result['busiest_process_over_handler_speed']}); {where}"
    )
    return result


def hot_key(
    bench: Bench, plan: OrderingPlan, side: Side, endpoints: dict[str, str]
) -> dict[str, Any]:
    scenarios: dict[str, Any] = {}
    for arrival in (STEADY, OUTAGE):
        runs = {
            layout: key_drain(bench, plan, side, endpoints, arrival, layout)
            for layout in (HOT, SPREAD, UNKEYED, ONE_WORKER)
        }
        if arrival == OUTAGE:
            runs[f"{HOT}_analyzed"] = key_drain(
                bench, plan, side, endpoints, arrival, HOT, analyze=True
            )
        hot = runs[HOT]["drain_events_per_second"]
        runs["spread_over_hot_key"] = round(runs[SPREAD]["drain_events_per_second"] / hot, 3)
        runs["unkeyed_over_hot_key"] = round(runs[UNKEYED]["drain_events_per_second"] / hot, 3)
        runs["hot_key_over_one_worker"] = round(
            hot / runs[ONE_WORKER]["drain_events_per_second"], 3
        )
        scenarios[arrival] = runs
    return scenarios


# -- the command --------------------------------------------------------------------------------


def cpu_probe() -> float:
    """Seconds for a fixed piece of pure Python: how fast this shared machine is now."""
    started = time.perf_counter()
    sum(range(3 * 10**7))
    return round(time.perf_counter() - started, 3)


def unkeyed(
    bench: Bench, plan: OrderingPlan, current: Side, baseline: Side | None
) -> dict[str, Any]:
    """Outage runs of each side in turn, in pairs whose order alternates (current then
    baseline, baseline then current, ...), so that neither always runs first."""
    imports = {side.name: check_imports(bench, side) for side in both_sides(current, baseline)}
    runs = [
        unkeyed_outage(bench, plan, side, f"outage-{n}-{side.name}")
        for n, side in in_pairs(current, baseline, plan.pairs)
    ]
    return {"imports": imports, "runs": runs, **compare(runs, FIGURES)}


def targets(a: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    met = {
        f"{arrival}: the hot key's drain ÷ one worker's unkeyed drain ≥ 0.9": (
            b[arrival]["hot_key_over_one_worker"] >= 0.9
        )
        for arrival in (STEADY, OUTAGE)
    }
    if "ratios" in a:
        drain, ingest = a["ratios"]["drain_events_per_second"], a["ratios"]["ingest_rps"]
        met["unkeyed drain: current ÷ baseline ≥ 0.95"] = drain >= 0.95
        met["unkeyed ingest: current ÷ baseline ≥ 0.95"] = ingest >= 0.95
    return met


def compared_lines(what: str, compared: dict[str, Any], commits: dict[str, str]) -> list[str]:
    """What `compare` found, a line a side (its medians), then, with a baseline, current ÷
    baseline of the medians and the median of the pairs' ratios."""
    ingest = "ingest_rps" in compared["current"]
    lines = []
    for side in ("current", "baseline"):
        if side in compared:
            m = compared[side]
            lines.append(
                f"{what}, {side} ({commits[side]}), median of {m['runs']}: drain "
                f"{m['drain_events_per_second']:,}/s from worker start "
                f"({m['drain_events_per_second_processed_at_span']:,}/s over processed_at)"
                + (f", ingest {m['ingest_rps']:,.0f} req/s" if ingest else "")
            )
    if "ratios" in compared:
        r, p = compared["ratios"], compared["pair_ratio_medians"]
        lines.append(
            f"{what}, current ÷ baseline of the medians: drain {r['drain_events_per_second']} "
            f"({r['drain_events_per_second_processed_at_span']} over processed_at)"
            + (f", ingest {r['ingest_rps']}" if ingest else "")
            + f"; median of the pairs' ratios: {p['drain_events_per_second']}, "
            f"{p['drain_events_per_second_processed_at_span']}"
            + (f", {p['ingest_rps']}" if ingest else "")
        )
    return lines


def summary(results: dict[str, Any]) -> list[str]:
    a, b = results["unkeyed"], results["hot_key"]
    lines = compared_lines("unkeyed outage", a, results["commits"])
    lines += key_lines(b)
    lines += [
        f"{'met' if ok else 'NOT MET'}: {target}" for target, ok in results["targets"].items()
    ]
    return lines


def key_lines(b: dict[str, Any]) -> list[str]:
    lines = []
    for arrival in (STEADY, OUTAGE):
        hot = b[arrival][HOT]
        lines.append(
            f"{arrival}, one key of {hot['events']:,}: {hot['drain_events_per_second']:,}/s, "
            f"handler {hot['handler_median_ms']} ms → {hot['drain_over_handler_speed']} × "
            f"handler speed, {b[arrival]['hot_key_over_one_worker']} × one worker's unkeyed "
            f"drain ({b[arrival][ONE_WORKER]['drain_events_per_second']:,}/s); spread over keys "
            f"{b[arrival][SPREAD]['drain_events_per_second']:,}/s, unkeyed "
            f"{b[arrival][UNKEYED]['drain_events_per_second']:,}/s"
        )
    analyzed = b[OUTAGE][f"{HOT}_analyzed"]
    lines.append(
        f"outage, one key, the events table analyzed before the workers start: "
        f"{analyzed['drain_events_per_second']:,}/s → {analyzed['drain_over_handler_speed']} × "
        "handler speed"
    )
    return lines


def keys_at(commit: str) -> None:
    """Only B, the hot key and its references, on ``commit`` installed on its own: the
    same figures for an earlier commit, run beside a full run for a before and after."""
    plan, probe_before = OrderingPlan(), cpu_probe()
    try:
        with (
            installed_side("current", commit, has_ordering=True) as side,
            prepared_bench(Plan.for_run(smoke=False), REDIS_URL) as bench,
        ):
            endpoints = {UNKEYED: bench.endpoint_id, "fifo": fifo_endpoint(bench)}
            bench.log(f"ordering at {side.commit}: one key's events, and its references")
            b = hot_key(bench, plan, side, endpoints)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    results: dict[str, Any] = {
        "date": dt.date.today().isoformat(),
        "cores": os.cpu_count(),
        "cpu_probe_seconds": {"before": probe_before, "after": cpu_probe()},
        "commit": side.commit,
        "plan": asdict(plan),
        "hot_key": b,
    }
    keep_results(results, f"ordering-keys-{side.commit}")
    echo_figures(results, key_lines(b))


@click.command()
@click.option("--smoke", is_flag=True, help="Small counts, no baseline: checks, not figures.")
@click.option(
    "--keys-at",
    "commit",
    metavar="COMMIT",
    help="Only the hot key and its references, on COMMIT: figures for a before and after.",
)
def main(smoke: bool, commit: str | None) -> None:
    if commit:
        keys_at(commit)
        return
    plan = OrderingPlan.for_run(smoke)
    load_before, probe_before = os.getloadavg(), cpu_probe()
    try:
        with (
            sides(BASELINE if plan.baseline else None, baseline_has_ordering=False) as (
                current,
                baseline,
            ),
            prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench,
        ):
            endpoints = {UNKEYED: bench.endpoint_id, "fifo": fifo_endpoint(bench)}
            bench.log("ordering: unkeyed outage bursts" + ", against the baseline" * plan.baseline)
            a = unkeyed(bench, plan, current, baseline)
            bench.log("ordering: one key's events; the same spread over keys, and unkeyed")
            b = hot_key(bench, plan, current, endpoints)
            web_workers = bench.web_workers
            autovacuum = psql(bench.database_url, "SHOW autovacuum")[0][0]
    except BenchError as exc:  # building a side (prepared_bench turns its own into these)
        raise click.ClickException(str(exc)) from exc
    results: dict[str, Any] = {
        **results_head(smoke, load_before),
        "cpu_probe_seconds": {"before": probe_before, "after": cpu_probe()},
        "commits": {"current": current.commit, "baseline": git("rev-parse", "--short", BASELINE)},
        # Smoke runs measure this checkout: the code under test changed but not committed.
        "uncommitted": None if plan.baseline else git("status", "--porcelain", "app", "workers"),
        "plan": asdict(plan),
        "web_workers": web_workers,
        # Without autovacuum nothing analyses the events table between runs (see docs).
        "postgres_autovacuum": autovacuum,
        "handlers": {"unkeyed": UNKEYED_HANDLERS, "keys": TIMED_HANDLERS},
        "unkeyed": a,
        "hot_key": b,
        "targets": targets(a, b),
    }
    finish(results, summary(results), name="ordering", smoke=smoke)


if __name__ == "__main__":
    main()
