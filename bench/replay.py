"""Bulk replay under load: does replaying 10,000 dead events disturb ingest, and does each
run once?

The dead events are made as production makes them: signed deliveries through gunicorn,
handled by two workers while the handler fails (a downstream outage, and
``HOOKLATCH_MAX_ATTEMPTS=1``), so each is dead with one failed attempt. Then the handler
is fixed, and:

1. **baseline**: unique deliveries at a steady open-loop rate, nothing else happening;
2. **replay**: the same rate of deliveries while a bulk replay of every dead event, started
   through ``POST /admin/replays`` with the default ``HOOKLATCH_REPLAY_BATCH_RATE``,
   runs in the relay and its replays in the workers.

Deliveries' p99 during the replay against the baseline's; how long the replay took;
and the checks: the batch is done with every event replayed, one replay per event for
the batch, each event's handler run once successfully, every event processed.

`python -m bench.replay [--smoke]` prints the figures (and, in full mode, writes them to
bench/results/<date>-replay.json). Smoke runs fail only on an event replayed twice, lost,
or a request not answered 200.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

import click
import requests

from bench import load
from bench.procs import ROOT, BenchError, psql, scalar, wait_until
from bench.scenarios import Bench, Plan, echo_figures, prepared_bench
from hooklatch.settings import Settings

REDIS_URL = "redis://127.0.0.1:6379/12"
HANDLERS = "bench.handlers.flaky"
TOKEN = "bench-admin-token-5c1e8a3f9b2d7046e8c3a1f5"  # long enough to start with


@dataclass(frozen=True)
class ReplayPlan:
    dead: int = 10_000
    # The dead events arrive at this rate (open loop), while the handler fails.
    arrival_rate: float = 400
    # Deliveries a second beside the replay, and alone for the baseline.
    beside_rate: float = 100
    baseline_seconds: float = 20
    replay_timeout_seconds: float = 900
    # Replays a second (HOOKLATCH_REPLAY_BATCH_RATE); None: the default, as deployed.
    batch_rate: float | None = None
    # Deliveries beside the replay go on this long past its expected end.
    margin_seconds: float = 15

    @classmethod
    def quick(cls) -> ReplayPlan:
        return cls(
            dead=200,
            arrival_rate=100,
            beside_rate=50,
            baseline_seconds=3,
            batch_rate=200,
            margin_seconds=5,
        )

    @property
    def rate(self) -> float:
        return self.batch_rate or Settings.replay_batch_rate


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


def deliveries(url: str, name: str, rate: float, seconds: float) -> tuple[threading.Thread, list]:
    """Open-loop deliveries in a thread; the list gets the result once they are sent."""
    items = load.signed_batch(name, int(rate * seconds))
    result: list[load.OpenLoopResult] = []
    sender = threading.Thread(target=lambda: result.append(load.open_loop(url, items, rate=rate)))
    sender.start()
    return sender, result


def p99_between(result: load.OpenLoopResult, start: float, end: float) -> tuple[float, int]:
    window = [ms for at, ms in result.samples if start <= at <= end]
    return load.percentile(window, 99), len(window)


def run(bench: Bench, plan: ReplayPlan) -> dict[str, Any]:
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_handler_runs, replay_batches CASCADE")
    broken = bench.work_dir / "broken"
    broken.touch()
    env = {
        "HOOKLATCH_MAX_ATTEMPTS": "1",
        "HOOKLATCH_ADMIN_TOKEN": TOKEN,
        "HOOKLATCH_REPLAY_BATCH_RATE": repr(plan.rate),
        "BENCH_BROKEN": str(broken),
    }
    server = bench.hooklatch(workers=2, handlers=HANDLERS, **env)  # type: ignore[arg-type]
    with server as (procs, base_url):
        url = base_url + bench.hook_path
        bench.log(f"  {plan.dead:,} deliveries whose handler fails")
        dead_events(bench, url, plan)
        broken.unlink()  # the fix is deployed
        psql(bench.database_url, "TRUNCATE bench_handler_runs")  # count the replays' runs

        bench.log("  baseline: deliveries alone")
        sender, alone = deliveries(url, "alone", plan.beside_rate, plan.baseline_seconds)
        sender.join()

        seconds = plan.dead / plan.rate + plan.margin_seconds
        sender, beside = deliveries(url, "beside", plan.beside_rate, seconds)
        time.sleep(1)
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
        wait_until(
            lambda: (
                scalar(
                    bench.database_url,
                    "SELECT count(*) FROM replays WHERE batch_id = %s AND status <> 'pending'",
                    (batch["id"],),
                )
                >= plan.dead
            ),
            timeout=plan.replay_timeout_seconds,
            what="every replay of the batch run",
        )
        ended = time.time()
        sender.join()
        procs.check_alive()
    return check_and_figures(bench, plan, batch["id"], alone[0], beside[0], started, ended)


def check_and_figures(
    bench: Bench,
    plan: ReplayPlan,
    batch_id: int,
    alone: load.OpenLoopResult,
    beside: load.OpenLoopResult,
    started: float,
    ended: float,
) -> dict[str, Any]:
    for name, result in (("baseline", alone), ("beside the replay", beside)):
        if result.failures:
            raise BenchError(f"{name}: {result.failures} deliveries not answered 200")
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
    doubled = psql(
        bench.database_url,
        "SELECT external_id FROM bench_handler_runs WHERE external_id LIKE 'evt_dead%%' "
        "GROUP BY external_id HAVING count(*) > 1 LIMIT 5",
    )
    runs = int(
        scalar(
            bench.database_url,
            "SELECT count(*) FROM bench_handler_runs WHERE external_id LIKE 'evt_dead%%'",
        )
    )
    still_dead = int(
        scalar(bench.database_url, "SELECT count(*) FROM events WHERE status = 'dead'")
    )
    if (status, replayed, skipped) != ("done", plan.dead, 0) or {replays, events} != {plan.dead}:
        raise BenchError(
            f"batch {status}: {replayed} replayed, {skipped} skipped; {replays} replays of "
            f"{events} events, for {plan.dead} dead"
        )
    if doubled or runs != plan.dead or succeeded != plan.dead or still_dead:
        raise BenchError(
            f"handlers ran twice for {doubled}; {runs} runs and {succeeded} successful "
            f"replays for {plan.dead} events; {still_dead} still dead"
        )
    during, answered = p99_between(beside, started, ended)
    return {
        "dead_events": plan.dead,
        "batch_rate_per_second": plan.rate,
        "replay_seconds": round(ended - started, 1),
        "replays_per_second": round(plan.dead / (ended - started), 1),
        "deliveries_rate": plan.beside_rate,
        "baseline_p99_ms": round(alone.response_p99_ms, 1),
        "baseline_p50_ms": round(alone.response_p50_ms, 1),
        "during_replay_p99_ms": round(during, 1),
        "during_replay_deliveries": answered,
        "replays_for_the_batch": replays,
        "events_replayed": events,
        "handler_runs": runs,
        "target_met": during <= 50,
    }


def summary(figures: dict[str, Any]) -> list[str]:
    return [
        f"{figures['dead_events']:,} dead events replayed in {figures['replay_seconds']} s "
        f"({figures['replays_per_second']}/s, batch rate {figures['batch_rate_per_second']:g}/s)",
        f"deliveries at {figures['deliveries_rate']:g}/s: p99 {figures['baseline_p99_ms']} ms "
        f"alone, {figures['during_replay_p99_ms']} ms during the replay "
        f"({figures['during_replay_deliveries']:,} answered; target ≤ 50 ms: "
        f"{'met' if figures['target_met'] else 'MISSED'})",
        f"each event replayed once for the batch ({figures['replays_for_the_batch']:,} replays, "
        f"{figures['handler_runs']:,} handler runs)",
    ]


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per phase: checks, not figures.")
def main(smoke: bool) -> None:
    plan = ReplayPlan.quick() if smoke else ReplayPlan()
    load_before = os.getloadavg()
    with prepared_bench(Plan.quick() if smoke else Plan.full(), REDIS_URL) as bench:
        bench.log("replay: bulk replay of dead events under load")
        figures = run(bench, plan)
    results = {
        "date": dt.date.today().isoformat(),
        "smoke": smoke,
        "load_average_before": [round(x, 2) for x in load_before],
        "plan": asdict(plan),
        "figures": figures,
    }
    if not smoke:
        path = ROOT / "bench" / "results" / f"{results['date']}-replay.json"
        results["file"] = str(path.relative_to(ROOT))
        path.write_text(json.dumps(results, indent=2) + "\n")
    echo_figures(results, summary(figures))
    if smoke:
        click.echo("smoke run: every check passed; its figures are not kept")


if __name__ == "__main__":
    main()
