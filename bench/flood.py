"""A flood of bad signatures beside good deliveries: what refusing costs everyone else.

gunicorn runs as the Procfile runs it, with the relay. Signed Stripe deliveries arrive at
a steady open-loop rate (100/s by default: the machine's two cores also run PostgreSQL,
Redis, the relay and both load generators, so this leaves headroom) and their response
times are measured from each one's scheduled send time. First alone, then with a second
load generator (wrk, bench/wrk/flood.lua) sending 1,000 requests/s with a bad signature
to the same endpoint. Target: the good deliveries' p99 with the flood at most twice its
value without.

Each run does this twice, with refusals counted as hooklatch counts them (in memory,
written at most about once per HOOKLATCH_REFUSAL_FLUSH_SECONDS per web process) and with
HOOKLATCH_REFUSAL_FLUSH_SECONDS=0, which writes every refusal at once: one upsert per
refused request on one hot row, as hooklatch did before. It also reports how many rows
the refusals table was written and the web workers' CPU time per refusal, and checks that
the counts add up to the refusals sent. `--bad-rate` sets another flood rate.

`python -m bench.flood [--smoke]` prints the figures.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import click

from bench import load
from bench.plans import Sized, sized
from bench.procs import BenchError, children, psql, scalar
from bench.scenarios import Bench, Plan, echo_figures, prepared_bench
from hooklatch.settings import Settings

# A Redis database of its own: the harness empties it between runs.
REDIS_URL = "redis://127.0.0.1:6379/12"
LUA = Path(__file__).resolve().parent / "wrk" / "flood.lua"
FORGED_SECRET = "whsec_not_the_endpoints_secret"
# Each way of counting refusals, and the HOOKLATCH_REFUSAL_FLUSH_SECONDS that gives it.
MODES = {"per_request_upsert": "0", "batched": str(Settings.refusal_flush_seconds)}


@dataclass(frozen=True)
class FloodPlan(Sized):
    good_rate: float = 100
    bad_rate: float = 1000
    seconds: float = sized(30, smoke=3)
    warmup_seconds: float = sized(3, smoke=1)
    # The flood runs this long before the good deliveries are measured beside it.
    flood_lead_seconds: float = sized(2, smoke=1)
    flood_connections: int = 50


def start_flood(url: str, plan: FloodPlan, seconds: float) -> subprocess.Popen[bytes]:
    """wrk sending bad signatures to ``url`` at ``plan.bad_rate`` for ``seconds``."""
    forged = load.sign("evt_flood_forged", secret=FORGED_SECRET)
    args = [
        load.wrk_path(),
        "-t1",
        f"-c{plan.flood_connections}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(LUA),
        url,
        "--",
        str(plan.bad_rate),
        "1",
        forged.signature,
        forged.body.decode(),
    ]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish_flood(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    """wrk's figures once it has finished: every answer must be a refusal (non-2xx)."""
    data, usage = load.wrk_figures(process)
    seconds = data["duration_us"] / 1e6
    if data["status_errors"] != data["requests"]:
        raise BenchError(f"flood: {data['requests']} answered, {data['status_errors']} refused")
    return {
        "requests": data["requests"],
        "rate": round(data["requests"] / seconds, 1),
        "refusal_p50_ms": data["p50_us"] / 1000,
        "refusal_p99_ms": data["p99_us"] / 1000,
        # Connections the server was too busy to answer within wrk's 10 s, or dropped.
        "socket_errors": data["socket_errors"],
        "loadgen_cpu_cores": round((usage.ru_utime + usage.ru_stime) / seconds, 2),
    }


def good_deliveries(bench: Bench, url: str, label: str, plan: FloodPlan) -> dict[str, Any]:
    items = load.signed_batch(label, int(plan.good_rate * plan.seconds))
    sent = load.open_loop(url, items, rate=plan.good_rate)
    if sent.failures:
        raise BenchError(f"{label}: {sent.failures} good deliveries were not answered 200")
    stored = bench.stored_hooklatch([item.external_id for item in items])
    if len(stored) != len(items):
        raise BenchError(f"{label}: {len(items)} answered 200, {len(stored)} stored")
    result = {
        "deliveries": sent.sent,
        "rate": round(sent.sent / sent.seconds, 1),
        "p50_ms": round(sent.response_p50_ms, 1),
        "p99_ms": round(sent.response_p99_ms, 1),
        "sender_start_lag_p99_ms": round(sent.start_lag_p99_ms, 1),
    }
    bench.log(
        f"    {label}: p50 {result['p50_ms']} ms, p99 {result['p99_ms']} ms "
        f"(sender's own start lag p99 {result['sender_start_lag_p99_ms']} ms)"
    )
    return result


def refusal_writes(database_url: str) -> int:
    """Rows inserted or updated in the refusals table since the database's stats began."""
    return int(
        scalar(
            database_url,
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) FROM pg_stat_user_tables "
            "WHERE relname = 'refusals'",
        )
    )


class CpuMeter:
    """CPU time the web workers have used so far, from /proc: what a request costs them.
    (Database backends come and go with the pool's overflow connections, and take their
    CPU time with them, so they are not measured.)"""

    def __init__(self, web_pid: int) -> None:
        self.web_pid = web_pid
        self.tick = os.sysconf("SC_CLK_TCK")

    def sample(self) -> dict[int, float]:
        return {pid: self._seconds(pid) for pid in children(self.web_pid)}

    @staticmethod
    def used(before: dict[int, float], after: dict[int, float]) -> float:
        """Seconds of CPU used between two samples (a worker started between counts whole)."""
        return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())

    def _seconds(self, pid: int) -> float:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime, stime


def run_mode(bench: Bench, mode: str, plan: FloodPlan) -> dict[str, Any]:
    """Good deliveries alone, then beside the flood, on one set of processes."""
    bench.reset()
    psql(bench.database_url, "TRUNCATE refusals")
    writes_before = refusal_writes(bench.database_url)
    bench.log(f"  {mode} (HOOKLATCH_REFUSAL_FLUSH_SECONDS={MODES[mode]})")
    with bench.hooklatch(HOOKLATCH_REFUSAL_FLUSH_SECONDS=MODES[mode]) as (procs, base_url):
        url = base_url + bench.hook_path
        meter = CpuMeter(procs.running[0].pid)
        warmup = FloodPlan(seconds=plan.warmup_seconds, good_rate=plan.good_rate)
        good_deliveries(bench, url, f"{mode}-warmup", warmup)
        started = meter.sample()
        alone = good_deliveries(bench, url, f"{mode}-alone", plan)
        between = meter.sample()
        flood = start_flood(url, plan, plan.flood_lead_seconds + plan.seconds + 1)
        try:
            time.sleep(plan.flood_lead_seconds)
            beside = good_deliveries(bench, url, f"{mode}-beside-flood", plan)
        finally:
            flooded = finish_flood(flood)
        ended = meter.sample()
        procs.check_alive()
    time.sleep(1)  # the web processes have exited; their statistics reach the view
    counted = int(scalar(bench.database_url, "SELECT coalesce(sum(count), 0) FROM refusals"))
    # Requests in flight when wrk stopped, or given up on, were refused and counted, not
    # reported.
    most = flooded["requests"] + plan.flood_connections + flooded["socket_errors"]
    if not flooded["requests"] <= counted <= most:
        raise BenchError(f"{mode}: {flooded['requests']} refused, {counted} counted")
    # What a refusal costs the web workers: the flood window's CPU, less what its good
    # deliveries cost alone.
    good_cpu, flood_cpu = CpuMeter.used(started, between), CpuMeter.used(between, ended)
    refusals_cpu = flood_cpu - good_cpu * beside["deliveries"] / alone["deliveries"]
    result = {
        "flush_seconds": float(MODES[mode]),
        "web_cpu_ms_per_refusal": round(1000 * refusals_cpu / flooded["requests"], 2),
        "alone": alone,
        "beside_flood": beside,
        "flood": flooded,
        "refusals_counted": counted,
        "refusal_row_writes": refusal_writes(bench.database_url) - writes_before,
        "p99_ratio": round(beside["p99_ms"] / alone["p99_ms"], 2),
    }
    bench.log(
        f"    flood at {flooded['rate']:,.0f}/s: {result['refusal_row_writes']:,} refusal row "
        f"writes for {counted:,} refusals; web CPU per refusal "
        f"{result['web_cpu_ms_per_refusal']} ms; good p99 {alone['p99_ms']} -> "
        f"{beside['p99_ms']} ms ({result['p99_ratio']} ×)"
    )
    return result


def run(
    bench: Bench, plan: FloodPlan, rounds: int = 1, modes: tuple[str, ...] = tuple(MODES)
) -> dict[str, Any]:
    """Every mode ``rounds`` times, the modes taking turns, so that a change in what else
    the machine runs weighs on both; the ratios compared are the medians."""
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for n in range(rounds):
        bench.log(f"round {n + 1} of {rounds}")
        for mode in modes:
            runs[mode].append(run_mode(bench, mode, plan))
    ratios = {mode: statistics.median(r["p99_ratio"] for r in runs[mode]) for mode in modes}
    return {
        "good_rate_per_second": plan.good_rate,
        "bad_rate_per_second": plan.bad_rate,
        "seconds_per_phase": plan.seconds,
        "web_workers": bench.web_workers,
        "target": "good deliveries' p99 beside the flood at most twice their p99 alone",
        "runs": runs,
        "median_p99_ratio": ratios,
        "target_met": ratios["batched"] <= 2 if "batched" in ratios else None,
    }


def summary(results: dict[str, Any]) -> list[str]:
    lines = [
        f"good deliveries at {results['good_rate_per_second']:.0f}/s, bad signatures at "
        f"{results['bad_rate_per_second']:.0f}/s, {results['seconds_per_phase']:.0f} s per "
        f"phase, {results['web_workers']} web workers"
    ]
    for mode, runs in results["runs"].items():
        for result in runs:
            alone, beside, flood = result["alone"], result["beside_flood"], result["flood"]
            lines.append(
                f"{mode:>18}: p50 {alone['p50_ms']} -> {beside['p50_ms']} ms, p99 "
                f"{alone['p99_ms']} -> {beside['p99_ms']} ms ({result['p99_ratio']} ×); flood "
                f"{flood['rate']:,.0f}/s (refusal p99 {flood['refusal_p99_ms']} ms); "
                f"{result['refusal_row_writes']:,} refusal row writes; web CPU per refusal "
                f"{result['web_cpu_ms_per_refusal']} ms"
            )
        lines.append(f"{mode:>18}: median p99 ratio {results['median_p99_ratio'][mode]} ×")
    if results["target_met"] is not None:
        state = "met" if results["target_met"] else "MISSED"
        lines.append(f"target (batched: median p99 ratio at most 2): {state}")
    return lines


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per phase: checks, not figures.")
@click.option("--rounds", default=1, show_default=True, help="Runs of each mode, in turns.")
@click.option("--bad-rate", type=float, default=None, help="Bad signatures per second [1000].")
@click.option("--seconds", type=float, default=None, help="Seconds per phase [30].")
@click.option(
    "--mode", "modes", multiple=True, type=click.Choice(list(MODES)), help="Only these [all]."
)
def main(
    smoke: bool, rounds: int, bad_rate: float | None, seconds: float | None, modes: tuple[str, ...]
) -> None:
    plan = FloodPlan.for_run(smoke)
    plan = replace(plan, bad_rate=bad_rate or plan.bad_rate, seconds=seconds or plan.seconds)
    with prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench:
        results = run(bench, plan, rounds, modes or tuple(MODES))
    echo_figures(results, summary(results))


if __name__ == "__main__":
    main()
