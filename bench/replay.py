"""Bulk replay beside live events: does replaying 10,000 dead events keep live events'
latency, and does each event run once?

One worker (`hooklatch worker`, as the Procfile runs it) and a handler of 30 ms
(``bench.handlers.paced``, a call to a downstream API). The dead events are made as
production makes them: signed deliveries through gunicorn, run by the worker while the
handler fails (a downstream outage, and ``HOOKLATCH_MAX_ATTEMPTS=1``), so each is dead with
one failed attempt. Then the handler is fixed, and:

1. **baseline**: live deliveries at a steady open-loop rate, nothing else happening;
2. **replay**: the same live deliveries while a bulk replay of every dead event, started
   through ``POST /admin/replays`` with the default rate and window, runs.

The figure is a live event's handler wait, from its storing (``received_at``) to its
handler's start: its p99 during the replay against the baseline's (target: at most
twice). Also: the deliveries' response times, how long the replay took, and the checks
that fail the run: the batch done with every event replayed and none skipped, one
replay per event for the batch, one successful handler run per event (a failed run's
row rolls back with its savepoint), no event left dead, every live event run once,
every delivery answered 200.

`python -m bench.replay [--smoke]` prints the figures (and, in full mode, writes them to
bench/results/<date>-replay.json). Smoke runs fail only on a check, never on a figure.
"""

from __future__ import annotations

import datetime as dt
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import click
import requests

from bench import load
from bench.plans import Sized, sized
from bench.procs import BenchError, psql, scalar, wait_until
from bench.scenarios import Bench, Plan, finish, head_commit, prepared_bench

REDIS_URL = "redis://127.0.0.1:6379/12"
HANDLERS = "bench.handlers.paced"
TOKEN = "bench-admin-token-5c1e8a3f9b2d7046e8c3a1f5"  # long enough to start with
# Live deliveries during the replay are sent in slices of this many seconds, until it ends.
SLICE_SECONDS = 10.0
LIVE_RUNS = "SELECT count(DISTINCT event_id) FROM bench_paced_runs WHERE NOT is_replay"


@dataclass(frozen=True)
class ReplayPlan(Sized):
    dead: int = sized(10_000, smoke=100)
    # The dead events arrive at this rate (open loop), while the handler fails.
    arrival_rate: float = sized(400, smoke=100)
    # Live deliveries a second, alone for the baseline and beside the replay: a sixth of
    # what one worker runs of a 30 ms handler.
    live_rate: float = 5
    baseline_seconds: float = sized(60, smoke=4)
    handler_seconds: float = 0.03
    replay_timeout_seconds: float = sized(1800, smoke=180)


def dead_events(bench: Bench, url: str, plan: ReplayPlan) -> None:
    items = load.signed_batch("dead", plan.dead)
    sent = load.open_loop(url, items, rate=plan.arrival_rate)
    if sent.failures:
        raise BenchError(f"{sent.failures} of the deliveries to kill were not answered 200")
    wait_until(
        lambda: (
            scalar(bench.database_url, "SELECT count(*) FROM events WHERE status = 'dead'")
            >= plan.dead
        ),
        timeout=600,
        what="the events dead",
    )


def live_until(
    url: str, name: str, rate: float, stop: threading.Event
) -> tuple[threading.Thread, list[load.OpenLoopResult]]:
    """Open-loop deliveries in a thread, a slice of SLICE_SECONDS at a time (each signed
    as it starts), until ``stop`` is set."""
    results: list[load.OpenLoopResult] = []

    def send() -> None:
        n = 0
        while not stop.is_set():
            items = load.signed_batch(f"{name}{n:03d}", int(rate * SLICE_SECONDS))
            results.append(load.open_loop(url, items, rate=rate))
            n += 1

    sender = threading.Thread(target=send)
    sender.start()
    return sender, results


def handler_waits(bench: Bench, prefix: str) -> list[tuple[float, float]]:
    """Each live event of ``prefix``: when it was stored (Unix time) and its handler's wait
    (ms), from that to its first run's start."""
    rows = psql(
        bench.database_url,
        "SELECT extract(epoch FROM e.received_at), min(r.started_at) FROM events e "
        "JOIN bench_paced_runs r ON r.event_id = e.id "
        "WHERE e.external_id LIKE %s AND NOT r.is_replay GROUP BY e.id",
        (f"evt_{prefix}%",),
    )
    return [(float(stored), (float(started) - float(stored)) * 1000) for stored, started in rows]


def replay_all(bench: Bench, base_url: str, plan: ReplayPlan) -> tuple[int, float, float]:
    """The bulk replay through the admin API, until every replay of it has run: its batch,
    and when it started and ended (Unix time)."""
    started = time.time()
    answer = requests.post(
        f"{base_url}/admin/replays",
        json={"status": "dead", "reason": "benchmark: the fix is deployed"},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    if answer.status_code != 202:
        raise BenchError(f"the bulk replay was refused: {answer.status_code} {answer.text}")
    batch = answer.json()
    bench.log(f"  replay: batch {batch['id']} of {batch['matched']:,} events")
    run = "SELECT count(*) FROM replays WHERE batch_id = %s AND status <> 'pending'"
    wait_until(
        lambda: scalar(bench.database_url, run, (batch["id"],)) >= plan.dead,
        timeout=plan.replay_timeout_seconds,
        what="every replay of the batch run",
    )
    return int(batch["id"]), started, time.time()


def run(bench: Bench, plan: ReplayPlan) -> dict[str, Any]:
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_paced_runs")
    broken = bench.work_dir / "broken"
    broken.touch()
    env = {
        "HOOKLATCH_MAX_ATTEMPTS": "1",
        "HOOKLATCH_ADMIN_TOKEN": TOKEN,
        "BENCH_BROKEN": str(broken),
        "BENCH_HANDLER_SECONDS": repr(plan.handler_seconds),
    }
    server = bench.hooklatch(workers=1, handlers=HANDLERS, **env)  # type: ignore[arg-type]
    with server as (procs, base_url):
        url = base_url + bench.hook_path
        bench.log(f"  {plan.dead:,} deliveries whose handler fails")
        dead_events(bench, url, plan)
        broken.unlink()  # the fix is deployed

        bench.log(f"  baseline: live deliveries alone, {plan.baseline_seconds:g} s")
        items = load.signed_batch("alone", int(plan.live_rate * plan.baseline_seconds))
        alone = load.open_loop(url, items, rate=plan.live_rate)

        stop = threading.Event()
        sender, beside = live_until(url, "beside", plan.live_rate, stop)
        time.sleep(1)
        batch_id, started, ended = replay_all(bench, base_url, plan)
        stop.set()
        sender.join()
        live = alone.sent + sum(r.sent for r in beside)
        wait_until(
            lambda: scalar(bench.database_url, LIVE_RUNS) >= live,
            timeout=60,
            what="every live event run",
        )
        procs.check_alive()
    return check_and_figures(bench, plan, batch_id, alone, beside, (started, ended))


def check_batch(bench: Bench, plan: ReplayPlan, batch_id: int) -> int:
    """The checks on the replays; returns the dead events' successful handler runs."""
    status, replayed, skipped = psql(
        bench.database_url,
        "SELECT status, replayed, skipped FROM replay_batches WHERE id = %s",
        (batch_id,),
    )[0]
    replays, events, succeeded = (
        int(x)
        for x in psql(
            bench.database_url,
            "SELECT count(*), count(DISTINCT event_id), count(*) FILTER "
            "(WHERE status = 'succeeded') FROM replays WHERE batch_id = %s",
            (batch_id,),
        )[0]
    )
    if (status, replayed, skipped) != ("done", plan.dead, 0) or {replays, events} != {plan.dead}:
        raise BenchError(
            f"batch {status}: {replayed} replayed, {skipped} skipped; {replays} replays of "
            f"{events} events, for {plan.dead} dead"
        )
    runs, doubled = (
        int(x)
        for x in psql(
            bench.database_url,
            "SELECT count(*), count(*) - count(DISTINCT event_id) FROM bench_paced_runs",
        )[0]
    )
    still_dead = int(
        scalar(bench.database_url, "SELECT count(*) FROM events WHERE status = 'dead'")
    )
    if doubled or succeeded != plan.dead or still_dead:
        raise BenchError(
            f"{doubled} handler runs were second runs; {succeeded} successful replays for "
            f"{plan.dead} events; {still_dead} still dead"
        )
    return runs


def check_and_figures(
    bench: Bench,
    plan: ReplayPlan,
    batch_id: int,
    alone: load.OpenLoopResult,
    beside: list[load.OpenLoopResult],
    during: tuple[float, float],
) -> dict[str, Any]:
    for name, results in (("baseline", [alone]), ("beside the replay", beside)):
        if failed := sum(r.failures for r in results):
            raise BenchError(f"{name}: {failed} deliveries not answered 200")
    runs = check_batch(bench, plan, batch_id)
    sent = alone.sent + sum(r.sent for r in beside)
    if runs != plan.dead + sent:
        raise BenchError(f"{runs} handler runs for {plan.dead} replays and {sent} live events")
    base = [ms for _, ms in handler_waits(bench, "alone")]
    started, ended = during
    waits = [ms for at, ms in handler_waits(bench, "beside") if started <= at <= ended]
    responses = [ms for r in beside for at, ms in r.samples if started <= at <= ended]
    baseline_p99, during_p99 = load.percentile(base, 99), load.percentile(waits, 99)
    return {
        "dead_events": plan.dead,
        "handler_ms": plan.handler_seconds * 1000,
        "replay_seconds": round(ended - started, 1),
        "replays_per_second": round(plan.dead / (ended - started), 1),
        "live_rate": plan.live_rate,
        "baseline_live_events": len(base),
        "baseline_wait_p50_ms": round(load.percentile(base, 50), 1),
        "baseline_wait_p99_ms": round(baseline_p99, 1),
        "baseline_wait_max_ms": round(max(base), 1),
        "during_live_events": len(waits),
        "during_wait_p50_ms": round(load.percentile(waits, 50), 1),
        "during_wait_p99_ms": round(during_p99, 1),
        "during_wait_max_ms": round(max(waits), 1),
        "wait_p99_ratio": round(during_p99 / baseline_p99, 2),
        "baseline_response_p99_ms": round(alone.response_p99_ms, 1),
        "during_response_p99_ms": round(load.percentile(responses, 99), 1),
        "handler_runs": runs,
        "target_met": during_p99 <= 2 * baseline_p99,
    }


def summary(figures: dict[str, Any]) -> list[str]:
    return [
        f"{figures['dead_events']:,} dead events replayed in {figures['replay_seconds']} s "
        f"({figures['replays_per_second']}/s, one worker, a {figures['handler_ms']:g} ms "
        "handler)",
        f"live events at {figures['live_rate']:g}/s, handler wait p50 / p99 / max: "
        f"{figures['baseline_wait_p50_ms']} / {figures['baseline_wait_p99_ms']} / "
        f"{figures['baseline_wait_max_ms']} ms alone ({figures['baseline_live_events']}), "
        f"{figures['during_wait_p50_ms']} / {figures['during_wait_p99_ms']} / "
        f"{figures['during_wait_max_ms']} ms during the replay "
        f"({figures['during_live_events']})",
        f"p99 during / alone: {figures['wait_p99_ratio']} (target ≤ 2: "
        f"{'met' if figures['target_met'] else 'MISSED'})",
        f"deliveries' response p99: {figures['baseline_response_p99_ms']} ms alone, "
        f"{figures['during_response_p99_ms']} ms during the replay",
        f"each event's handler ran once ({figures['handler_runs']:,} runs)",
    ]


@click.command()
@click.option("--smoke", is_flag=True, help="A few hundred events: checks, not figures.")
def main(smoke: bool) -> None:
    plan = ReplayPlan.for_run(smoke)
    load_before = os.getloadavg()
    with prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench:
        bench.log("replay: bulk replay of dead events beside live events, one worker")
        figures = run(bench, plan)
    results = {
        "date": dt.date.today().isoformat(),
        "commit": head_commit(),
        "smoke": smoke,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "plan": asdict(plan),
        "figures": figures,
    }
    finish(results, summary(figures), name="replay", smoke=smoke)


if __name__ == "__main__":
    main()
