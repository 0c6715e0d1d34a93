"""Retention under load: does cleanup outrun ingest, and do the tables stop growing?

**Capacity.** Events arrive through gunicorn (wrk, unique events, no relay or worker:
an outage), which measures the ingest rate of this run. A relay and a worker then process
the backlog with long clocks. Then a relay starts whose payload clock has expired for
all of it, and after that one whose dedupe clock has: each time, signed deliveries keep
arriving at a steady open-loop rate, and their response times are measured. The relay's
own log line gives each pass's rows and duration. Targets: rows deleted per second by one
relay at least 5 times the ingest rate, and the deliveries' p99 while the pass ran within
50 ms.

**Soak.** Everything at once for a few minutes, clocks in seconds: deliveries at a steady
rate, a relay, a `hooklatch worker` as the Procfile runs it. The events
table's rows and size are sampled; they must level off. Where the server runs without
autovacuum (this machine's does), the harness runs VACUUM every few seconds in its place,
and says so: without it, no delete in PostgreSQL gives space back.

`python -m bench.retention [--smoke]` prints the figures. Smoke runs fail only on a lost
or doubled event (every delivery answered 200, every event's handler run once).
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from bench import load
from bench.plans import Sized, sized
from bench.procs import BIN, BenchError, Procs, psql, scalar, wait_until
from bench.scenarios import Bench, Plan, finish, prepared_bench

REDIS_URL = "redis://127.0.0.1:6379/11"
DAY = 86400.0
HANDLERS = "bench.handlers.record"  # one row per handler run: a double shows
PASS_LINE = re.compile(
    r"^(\S+ \S+) INFO .*cleanup: (\d+) payloads pruned, (\d+) events deleted in ([\d.]+) s"
)


@dataclass(frozen=True)
class RetentionPlan(Sized):
    backlog_seconds: float = sized(20, smoke=2)
    # Deliveries a second while a pass runs, open loop: a steady load well inside what
    # this machine ingests even in its slow hours, so that a p99 above it is cleanup's.
    beside_rate: float = 100
    beside_seconds: float = sized(15, smoke=4)
    soak_seconds: float = sized(180, smoke=12)
    soak_rate: float = sized(100, smoke=50)
    soak_payload_seconds: float = sized(5, smoke=1)
    soak_dedupe_seconds: float = sized(15, smoke=3)
    sample_seconds: float = sized(5, smoke=1)


def clocks(payload_seconds: float, dedupe_seconds: float) -> dict[str, str]:
    return {
        "HOOKLATCH_PAYLOAD_RETENTION_DAYS": repr(payload_seconds / DAY),
        "HOOKLATCH_DEDUPE_RETENTION_DAYS": repr(dedupe_seconds / DAY),
        "HOOKLATCH_UNSAFE_SHORT_RETENTION": "true",
        "HOOKLATCH_CLEANUP_INTERVAL_SECONDS": "1",
    }


def relay_passes(log: str) -> list[dict[str, Any]]:
    """The relay's cleanup passes that did something, from its log."""
    passes = []
    for line in log.splitlines():
        match = PASS_LINE.match(line)
        if match:
            ended = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            seconds = float(match[4])
            passes.append(
                {
                    "pruned": int(match[2]),
                    "deleted": int(match[3]),
                    "seconds": seconds,
                    "started": ended - seconds,
                    "ended": ended,
                }
            )
    return passes


def p99_within(samples: tuple[tuple[float, float], ...], start: float, end: float) -> float:
    return load.percentile([ms for at, ms in samples if start <= at <= end], 99)


def cleanup_beside_deliveries(
    bench: Bench, procs: Procs, url: str, plan: RetentionPlan, name: str, env: dict[str, str]
) -> dict[str, Any]:
    """Deliveries at a steady rate; a second in, a relay with ``env``'s clocks starts."""
    items = load.signed_batch(f"{name}-beside", int(plan.beside_rate * plan.beside_seconds))
    sent: list[load.OpenLoopResult] = []
    sender = threading.Thread(
        target=lambda: sent.append(load.open_loop(url, items, rate=plan.beside_rate))
    )
    sender.start()
    time.sleep(1)
    relay = procs.start(f"relay-{name}", [str(BIN / "hooklatch"), "relay"], bench.env(**env))
    sender.join()
    wait_until(
        lambda: bool(relay_passes(relay.log_path.read_text())),
        timeout=120,
        what=f"the {name} relay's first cleanup pass",
    )
    procs.stop(relay)
    (result,) = sent
    if result.failures:
        raise BenchError(f"{name}: {result.failures} deliveries beside cleanup not answered 200")
    first = relay_passes(relay.log_path.read_text())[0]
    rows = first["pruned"] + first["deleted"]
    during = p99_within(result.samples, first["started"], first["ended"])
    # The same phase's deliveries outside the pass: the baseline of this run.
    outside = [ms for at, ms in result.samples if not first["started"] <= at <= first["ended"]]
    figures = {
        "rows": rows,
        "pass_seconds": first["seconds"],
        "rows_per_second": round(rows / first["seconds"]),
        "deliveries_p99_ms": round(result.response_p99_ms, 1),
        "deliveries_during_pass_p99_ms": round(during, 1),
        "deliveries_outside_pass_p99_ms": round(load.percentile(outside, 99), 1),
        "deliveries_during_pass": sum(
            1 for at, _ in result.samples if first["started"] <= at <= first["ended"]
        ),
    }
    bench.log(
        f"  {name}: {rows:,} rows in {first['seconds']:.2f} s "
        f"({figures['rows_per_second']:,}/s); deliveries' p99 during the pass "
        f"{figures['deliveries_during_pass_p99_ms']} ms (outside it "
        f"{figures['deliveries_outside_pass_p99_ms']} ms)"
    )
    return figures


def capacity(bench: Bench, plan: RetentionPlan) -> dict[str, Any]:
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_handler_runs")
    with bench.hooklatch(relay=False, handlers=HANDLERS) as (procs, base_url):
        url = base_url + bench.hook_path
        items = load.signed_batch("backlog", int(bench.plan.max_rps * plan.backlog_seconds))
        path = load.write_requests(bench.work_dir / "backlog.req", bench.hook_path, items)
        ingest = load.run_wrk(
            url, path, connections=bench.plan.connections, seconds=plan.backlog_seconds
        )
        if ingest.status_errors or ingest.socket_errors or ingest.wrapped:
            raise BenchError(f"backlog: {ingest.status_errors} refused, wrapped {ingest.wrapped}")
        backlog = int(scalar(bench.database_url, "SELECT count(*) FROM events"))
        bench.log(
            f"  ingest: {ingest.rps:,.0f} req/s, p99 {ingest.p99_ms:.1f} ms; {backlog:,} stored"
        )
        env = bench.env(HOOKLATCH_HANDLERS=HANDLERS)
        procs.start("worker", [str(BIN / "hooklatch"), "worker"], env)
        relay = procs.start("relay", [str(BIN / "hooklatch"), "relay"], env)
        wait_until(lambda: pending(bench) == 0, timeout=600, what="the backlog processed")
        procs.stop(relay)
        prune = cleanup_beside_deliveries(bench, procs, url, plan, "prune", clocks(1, 30 * DAY))
        delete = cleanup_beside_deliveries(bench, procs, url, plan, "delete", clocks(1, 2))
        procs.check_alive()
    left = int(
        scalar(
            bench.database_url,
            "SELECT count(*) FROM events WHERE external_id LIKE 'evt_backlog%%'",
        )
    )
    if left or prune["rows"] < backlog or delete["rows"] < backlog:
        raise BenchError(
            f"{backlog} stored; pruned {prune['rows']}, deleted {delete['rows']}, {left} left"
        )
    check_runs_once(bench)
    ratio = delete["rows_per_second"] / ingest.rps
    return {
        "ingest_rps": round(ingest.rps),
        "ingest_p99_ms": round(ingest.p99_ms, 1),
        "backlog": backlog,
        "prune": prune,
        "delete": delete,
        "deletes_over_ingest": round(ratio, 2),
        "target_met": ratio >= 5 and delete["deliveries_during_pass_p99_ms"] <= 50,
    }


def pending(bench: Bench) -> int:
    return int(scalar(bench.database_url, "SELECT count(*) FROM events WHERE status = 'pending'"))


def check_runs_once(bench: Bench) -> None:
    doubled = psql(
        bench.database_url,
        "SELECT external_id, count(*) FROM bench_handler_runs GROUP BY external_id "
        "HAVING count(*) > 1 LIMIT 5",
    )
    if doubled:
        raise BenchError(f"handlers ran twice for {doubled}")


def soak(bench: Bench, plan: RetentionPlan) -> dict[str, Any]:
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_handler_runs")
    vacuums = str(scalar(bench.database_url, "SHOW autovacuum")) == "off"
    env = clocks(plan.soak_payload_seconds, plan.soak_dedupe_seconds)
    samples: list[dict[str, Any]] = []
    server = bench.hooklatch(handlers=HANDLERS, **env)  # type: ignore[arg-type]
    with server as (procs, base_url):
        # The Procfile's worker, as production runs it. Rows it has not reached are not
        # cleanup's to delete: the pending count sampled below shows it keeping up.
        worker = [str(BIN / "hooklatch"), "worker"]
        procs.start("worker", worker, bench.env(HOOKLATCH_HANDLERS=HANDLERS, **env))
        items = load.signed_batch("soak", int(plan.soak_rate * plan.soak_seconds))
        sent: list[load.OpenLoopResult] = []
        sender = threading.Thread(
            target=lambda: sent.append(
                load.open_loop(base_url + bench.hook_path, items, rate=plan.soak_rate)
            )
        )
        started = time.monotonic()
        sender.start()
        while sender.is_alive():
            time.sleep(plan.sample_seconds)
            if vacuums:
                psql(bench.database_url, "VACUUM events, attempts, outbox")
            samples.append(table_sample(bench, time.monotonic() - started))
        sender.join()
        wait_until(lambda: pending(bench) == 0, timeout=120, what="the soak's events processed")
        procs.check_alive()
    if sent[0].failures:
        raise BenchError(f"soak: {sent[0].failures} deliveries not answered 200")
    ran = int(
        scalar(bench.database_url, "SELECT count(DISTINCT external_id) FROM bench_handler_runs")
    )
    if ran != len(items):
        raise BenchError(f"soak: {len(items)} delivered, {ran} handled")
    check_runs_once(bench)
    third = max(1, len(samples) // 3)
    middle, last = samples[third : 2 * third] or samples, samples[-third:]
    growth = {
        key: round(max(s[key] for s in last) / max(1e-9, max(s[key] for s in middle)), 2)
        for key in ("rows", "events_mb", "attempts_mb")
    }
    # Rows a worker has not reached are not cleanup's to delete: a plateau of the table
    # while they pile up would be the worker's lag, not cleanup's work.
    most_pending = max(s["pending"] for s in samples)
    kept_up = most_pending <= 5 * plan.soak_rate
    bench.log(
        f"  soak: {len(items):,} events over {plan.soak_seconds:.0f} s; growth {growth}; "
        f"most pending {most_pending}"
    )
    return {
        "events": len(items),
        "rate": plan.soak_rate,
        "payload_seconds": plan.soak_payload_seconds,
        "dedupe_seconds": plan.soak_dedupe_seconds,
        "harness_vacuums": vacuums,
        "samples": samples,
        "last_third_over_middle_third": growth,
        "most_pending": most_pending,
        "worker_kept_up": kept_up,
        "plateau": kept_up and all(value <= 1.1 for value in growth.values()),
    }


def table_sample(bench: Bench, at: float) -> dict[str, Any]:
    rows, waiting, events_bytes, attempts_bytes = psql(
        bench.database_url,
        "SELECT (SELECT count(*) FROM events), "
        "(SELECT count(*) FROM events WHERE status = 'pending'), "
        "pg_total_relation_size('events'), pg_total_relation_size('attempts')",
    )[0]
    return {
        "at": round(at, 1),
        "rows": int(rows),
        # Not processed yet, so not cleanup's to delete: a worker falling behind shows here.
        "pending": int(waiting),
        "events_mb": round(events_bytes / 2**20, 2),
        "attempts_mb": round(attempts_bytes / 2**20, 2),
    }


def summary(results: dict[str, Any]) -> list[str]:
    cap, soaked = results["capacity"], results["soak"]
    delete, prune = cap["delete"], cap["prune"]
    return [
        f"ingest {cap['ingest_rps']:,}/s (p99 {cap['ingest_p99_ms']} ms), "
        f"backlog {cap['backlog']:,}",
        f"prune: {prune['rows_per_second']:,} rows/s; deliveries' p99 during it "
        f"{prune['deliveries_during_pass_p99_ms']} ms",
        f"delete: {delete['rows_per_second']:,} rows/s = {cap['deletes_over_ingest']} × ingest; "
        f"deliveries' p99 during it {delete['deliveries_during_pass_p99_ms']} ms "
        f"(target: ≥ 5 ×, ≤ 50 ms: {'met' if cap['target_met'] else 'MISSED'})",
        f"soak: last third over middle third {soaked['last_third_over_middle_third']}, "
        f"at most {soaked['most_pending']} events pending "
        f"({'plateau' if soaked['plateau'] else 'NO PLATEAU'}; harness VACUUM: "
        f"{soaked['harness_vacuums']})",
    ]


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per phase: checks, not figures.")
def main(smoke: bool) -> None:
    plan = RetentionPlan.for_run(smoke)
    with prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench:
        bench.log("retention: capacity")
        results: dict[str, Any] = {"date": dt.date.today().isoformat(), "smoke": smoke}
        results["capacity"] = capacity(bench, plan)
        bench.log("retention: soak")
        results["soak"] = soak(bench, plan)
    finish(results, summary(results), name="retention", smoke=smoke)


if __name__ == "__main__":
    main()
