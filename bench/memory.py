"""The work horse's memory with large bodies, and what reading bodies apart from claims
costs small events.

A. **Large bodies.** Signed Stripe-shaped deliveries (an invoice with enough line items to
   reach the size) arrive over HTTP through gunicorn as the Procfile runs it, while no
   relay or worker runs (an outage); then one relay and one `hooklatch worker` start, and
   the relay hands every event to one job. Once every event has run its handler, the
   work horse's peak resident set (VmHWM, read from /proc while it still lives) and its
   resident set then (VmRSS); the worker's own peak beside it. Runs: 80 deliveries of
   4 MiB at the default settings, and 10 of 25 MB with ``HOOKLATCH_MAX_BODY_BYTES`` at
   25 MiB; in full runs each also on the code before (``BASELINE``), and the 4 MiB ones at
   other ``HOOKLATCH_WORKER_BODY_BYTES``: the peak as a function of the setting.
B. **Small events drain as before.** An outage of a fixed size: 10,000 unique signed 2 KB
   events (``bench.load``'s) sent over HTTP at a steady rate to gunicorn and a relay, no
   worker running; then two workers start and drain them. Drain rate = events ÷ (worker
   start → last processed), and over the events' processed_at span. Run on HEAD and on
   ``BASELINE``, each installed on its own as ``bench.ordering`` installs its sides, in
   pairs whose order alternates (A B B A ...); medians, current ÷ baseline of the
   medians, and the median of the pairs' ratios. The same backlog on both sides: a burst
   cut by time would leave a slower side a smaller one, whose drain pays the workers'
   start over fewer events.
C. **The same, without HTTP, gunicorn or a relay beside it.** 20,000 such events stored
   by SQL once, the database copied (``CREATE DATABASE ... TEMPLATE``) for each run, and
   drained by one process running the jobs' body (``bench.drain_once``, with each side's
   interpreter), in pairs whose order alternates: the workers' own cost per event, with
   less of the machine's noise around it.

Every run checks that each event ran its handler exactly once and that every request was
answered 200. ``python -m bench.memory [--smoke]`` prints the figures (and, in full mode,
writes them to bench/results/<date>-memory.json). Smoke runs measure this checkout with
small counts and no baseline, and fail only on an event lost or doubled or a request
refused, never on figures.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import requests
from stripe import WebhookSignature

from bench import arrivals, load, ordering
from bench.copies import one_process
from bench.ordering import Side, cpu_probe, git, run_quietly
from bench.plans import Sized, sized
from bench.procs import ROOT, BenchError, Procs, memory_mib
from bench.scenarios import (
    Bench,
    Plan,
    _wait_children,
    finish,
    prepared_bench,
    results_head,
)

BASELINE = "adf8674"  # the last commit whose claims read every event's body
REDIS_URL = "redis://127.0.0.1:6379/15"
HANDLERS = arrivals.HANDLERS  # one bench_effects row per event: a double fails
MIB = 1024 * 1024
DEFAULT_BUDGET = 32 * MIB


@dataclass(frozen=True)
class Large:
    """One run of A: ``count`` deliveries of about ``body_bytes`` each."""

    name: str
    count: int
    body_bytes: int
    max_body_bytes: int = 5 * MIB
    budget: int = DEFAULT_BUDGET

    def env(self) -> dict[str, str]:
        return {
            "HOOKLATCH_MAX_BODY_BYTES": str(self.max_body_bytes),
            "HOOKLATCH_WORKER_BODY_BYTES": str(self.budget),
        }


FOUR_MIB = Large("80 x 4 MiB", 80, 4 * MIB)
LIMIT = Large("10 x 25 MB", 10, 25_000_000, max_body_bytes=25 * MIB)


@dataclass(frozen=True)
class MemoryPlan(Sized):
    large: tuple[Large, ...] = sized(
        (FOUR_MIB, LIMIT),
        smoke=(Large("8 x 4 MiB", 8, 4 * MIB), Large("2 x 25 MB", 2, 25_000_000, 25 * MIB)),
    )
    # On HEAD only: the peak against the setting.
    current_only: tuple[Large, ...] = sized(
        (
            Large("80 x 4 MiB", 80, 4 * MIB, budget=8 * MIB),
            Large("80 x 4 MiB", 80, 4 * MIB, budget=128 * MIB),
        ),
        smoke=(),
    )
    # B: the backlog, the rate it is sent at (within what gunicorn takes here), the pairs.
    small_events: int = sized(10_000, smoke=500)
    small_rate: float = 1500
    workers: int = 2
    pairs: int = sized(6, smoke=1)
    # C: the events in the copied database, and the pairs of drains.
    copy_events: int = sized(20_000, smoke=500)
    copy_pairs: int = sized(6, smoke=1)
    baseline: bool = sized(True, smoke=False)


# -- the code under test ------------------------------------------------------------------------


PROBE = """
import importlib.util, json, hooklatch
found = importlib.util.find_spec("hooklatch.events.payloads") is not None
print(json.dumps({"file": hooklatch.__file__, "payloads": found}))
"""


def check_imports(bench: Bench, side: Side) -> dict[str, Any]:
    """Which hooklatch this side's processes import: its own, with payloads read apart
    from claims (``hooklatch.events.payloads``) or, at the baseline, without."""
    found = json.loads(
        run_quietly(
            [str(side.python), "-c", PROBE], f"the {side.name} probe", cwd=ROOT, env=bench.env()
        )
    )
    where = Path(found["file"]).resolve()
    if found["payloads"] != (side.name != "baseline") or not where.is_relative_to(
        side.home.resolve()
    ):
        raise BenchError(f"{side.name} processes import the wrong hooklatch: {found}")
    return {"commit": side.commit, "hooklatch": str(where), "payloads_apart": found["payloads"]}


# -- A: large bodies ----------------------------------------------------------------------------


def large_body(external_id: str, stamp: int, size: int) -> bytes:
    """An invoice.paid event of about ``size`` bytes: line items, as a large invoice lists
    them, so that the parsed payload is several times the body, as JSON's is."""
    line = {
        "id": "il_0000000",
        "object": "line_item",
        "amount": 1000,
        "currency": "usd",
        "description": "Seat licence, billed monthly",
    }
    count = size // (len(json.dumps(line)) + 2)
    lines = [{**line, "id": f"il_{n:07d}", "amount": n} for n in range(count)]
    payload = {
        "id": external_id,
        "object": "event",
        "type": "invoice.paid",
        "created": stamp,
        "data": {"object": {"id": f"in_{external_id}", "lines": {"data": lines}}},
    }
    return json.dumps(payload).encode()


def send_large(base_url: str, hook_path: str, run: Large) -> float:
    """Each delivery signed and sent in turn; every one answered 200. Their mean size."""
    stamp, sizes = int(time.time()), []
    with requests.Session() as session:
        for n in range(run.count):
            external_id = f"evt_large_{n:04d}"
            body = large_body(external_id, stamp, run.body_bytes)
            digest = WebhookSignature._compute_signature(f"{stamp}.{body.decode()}", load.SECRET)
            response = session.post(
                base_url + hook_path,
                data=body,
                headers={"Stripe-Signature": f"t={stamp},v1={digest}"},
                timeout=60,
            )
            if response.status_code != 200:
                raise BenchError(f"{run.name}: delivery {n} answered {response.status_code}")
            sizes.append(len(body))
    return sum(sizes) / len(sizes)


def memory(pid: int) -> dict[str, float]:
    found = memory_mib(pid)
    return {"peak_mib": round(found["peak"], 1), "after_mib": round(found["rss"], 1)}


def large_run(bench: Bench, side: Side, run: Large) -> dict[str, Any]:
    bench.reset()
    env = bench.env(HOOKLATCH_HANDLERS=HANDLERS, **run.env())
    with Procs(bench.work_dir) as procs:
        _, base_url = ordering.start_web(procs, side, env)
        mean = send_large(base_url, bench.hook_path, run)
        procs.start(f"{side.name}-relay", [side.hooklatch, "relay"], env)
        worker = procs.start(f"{side.name}-worker", [side.hooklatch, "worker"], env)
        _wait_children(worker.pid)
        done = arrivals.drained(bench, procs, 600, run.name)
        horse = memory(horse_of(worker.pid))
        own = memory(worker.pid)
    arrivals.check_once(bench, run.name)
    sizes = arrivals.finished_job_sizes(bench)
    result: dict[str, Any] = {
        "side": side.name,
        "commit": side.commit,
        "run": asdict(run),
        "body_bytes_mean": round(mean),
        "jobs": sizes,
        "work_horse": horse,
        "worker_peak_mib": own["peak_mib"],
        "processed_seconds": round(done, 1),
    }
    bench.log(
        f"  {described(result['run'])}, {side.name} {side.commit}: work horse peak "
        f"{horse['peak_mib']:,} MiB, {horse['after_mib']:,} MiB after; jobs {sizes}"
    )
    return result


def horse_of(worker: int) -> int:
    path = Path(f"/proc/{worker}/task/{worker}/children")
    children = path.read_text().split()
    if len(children) != 1:
        raise BenchError(f"the worker has {len(children)} children, not one work horse")
    return int(children[0])


def large_bodies(
    bench: Bench, plan: MemoryPlan, current: Side, baseline: Side | None
) -> list[dict[str, Any]]:
    both = ordering.both_sides(current, baseline)
    runs = [large_run(bench, side, run) for run in plan.large for side in both]
    return runs + [large_run(bench, current, run) for run in plan.current_only]


# -- B: small events --------------------------------------------------------------------------


def small_run(bench: Bench, plan: MemoryPlan, side: Side, name: str) -> dict[str, Any]:
    """The backlog sent with no worker running, then drained by ``plan.workers``."""
    bench.reset()
    with ordering.servers(bench, side, HANDLERS) as (procs, base_url):
        items = load.signed_batch(name, plan.small_events)
        sent = load.open_loop(base_url + bench.hook_path, items, rate=plan.small_rate)
        del items
        if sent.failures:
            raise BenchError(f"{name}: {sent.failures} requests were not answered 200")
        time.sleep(1)  # a relay pass
        if arrivals.pending(bench) != plan.small_events:
            raise BenchError(f"{name}: {arrivals.pending(bench)} of {plan.small_events} pending")
        started = time.time()
        env = bench.env(HOOKLATCH_HANDLERS=HANDLERS)
        ordering.start_workers(procs, side, env, plan.workers)
        arrivals.drained(bench, procs, 600, name)
    times = arrivals.check_once(bench, name)
    wall = times["last_processed"] - started
    span = times["last_processed"] - times["first_processed"]
    result = {
        "side": side.name,
        "commit": side.commit,
        "events": times["events"],
        "sent_per_second": round(sent.sent / sent.seconds, 1),
        "job_shape": arrivals.job_shape(arrivals.finished_job_sizes(bench)),
        "drain_events_per_second": arrivals.rate(times["events"], wall),
        "drain_events_per_second_processed_at_span": arrivals.rate(times["events"] - 1, span),
    }
    bench.log(
        f"  {name} ({side.name} {side.commit}): drain {result['drain_events_per_second']:,}/s "
        f"from worker start, {result['drain_events_per_second_processed_at_span']:,}/s over "
        "processed_at"
    )
    return result


# The figures compared: ordering.compare's, each at the top of a run's result.
FIGURES = {
    name: (name,)
    for name in ("drain_events_per_second", "drain_events_per_second_processed_at_span")
}


def small_events(
    bench: Bench, plan: MemoryPlan, current: Side, baseline: Side | None
) -> dict[str, Any]:
    """Runs of each side in pairs whose order alternates, so that neither always runs first."""
    runs = [
        small_run(bench, plan, side, f"small-{n}-{side.name}")
        for n, side in ordering.in_pairs(current, baseline, plan.pairs)
    ]
    return {"runs": runs, **ordering.compare(runs, FIGURES)}


# -- the command --------------------------------------------------------------------------------


def described(run: dict[str, Any]) -> str:
    return f"{run['name']} (budget {run['budget'] // MIB} MiB)"


def summary(results: dict[str, Any]) -> list[str]:
    lines = [
        f"{described(r['run'])}, {r['side']} {r['commit']}: work horse peak "
        f"{r['work_horse']['peak_mib']:,} MiB, {r['work_horse']['after_mib']:,} MiB after; "
        f"{len(r['jobs'])} job(s)"
        for r in results["large"]
    ]
    lines += ordering.compared_lines("small events", results["small"], results["commits"])
    copies = results["one_process"]
    lines.append(
        "small events drained by one process, medians: "
        + ", ".join(f"{side} {rate:,}/s" for side, rate in copies["medians"].items())
        + (
            f"; current ÷ baseline {copies['ratio']}, median of the pairs' ratios "
            f"{copies['pair_ratio_median']}"
            if "ratio" in copies
            else ""
        )
    )
    lines += [f"{'met' if ok else 'NOT MET'}: {t}" for t, ok in results["targets"].items()]
    return lines


def targets(
    large: list[dict[str, Any]], small: dict[str, Any], copies: dict[str, Any]
) -> dict[str, bool]:
    met = {
        f"{r['run']['name']} at the default budget: work horse peak ≤ 300 MB": (
            r["work_horse"]["peak_mib"] * MIB <= 300e6
        )
        for r in large
        if r["side"] == "current" and r["run"] == asdict(FOUR_MIB)
    }
    if "ratios" in small:
        met["small events' outage drain: current ÷ baseline ≥ 0.95"] = (
            small["pair_ratio_medians"]["drain_events_per_second"] >= 0.95
        )
    if "ratio" in copies:
        met["small events drained by one process: current ÷ baseline ≥ 0.95"] = (
            copies["pair_ratio_median"] >= 0.95
        )
    return met


@click.command()
@click.option("--smoke", is_flag=True, help="Small counts, no baseline: checks, not figures.")
def main(smoke: bool) -> None:
    plan = MemoryPlan.for_run(smoke)
    load_before, probe_before = os.getloadavg(), cpu_probe()
    try:
        with (
            ordering.sides(BASELINE if plan.baseline else None, baseline_has_ordering=True) as (
                current,
                baseline,
            ),
            prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench,
        ):
            both = ordering.both_sides(current, baseline)
            imports = {side.name: check_imports(bench, side) for side in both}
            bench.log("memory: large bodies, one job each")
            large = large_bodies(bench, plan, current, baseline)
            bench.log(
                "memory: small events' outage drain" + ", against the baseline" * plan.baseline
            )
            small = small_events(bench, plan, current, baseline)
            bench.log("memory: small events drained by one process from copies of a database")
            copies = one_process(bench, plan.copy_events, plan.copy_pairs, current, baseline)
    except BenchError as exc:
        raise click.ClickException(str(exc)) from exc
    results: dict[str, Any] = {
        **results_head(smoke, load_before),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_probe_seconds": {"before": probe_before, "after": cpu_probe()},
        "commits": {"current": current.commit, "baseline": git("rev-parse", "--short", BASELINE)},
        "uncommitted": None if plan.baseline else git("status", "--porcelain", "app", "workers"),
        "imports": imports,
        "plan": asdict(plan),
        "handlers": HANDLERS,
        "large": large,
        "small": small,
        "one_process": copies,
        "targets": targets(large, small, copies),
    }
    finish(results, summary(results), name="memory", smoke=smoke)


if __name__ == "__main__":
    main()
