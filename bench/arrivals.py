"""Load that arrives over time: events come in through HTTP while (or before) workers run.

The drain scenario of `python -m bench` inserts its backlog with SQL, so the relay finds
it all at once and cuts full jobs: a best case. In production the events arrive through
gunicorn a few at a time, while workers run or while they are away, and what a job holds
depends on when the relay hands it out. These scenarios build their load that way, in
one run, so that their ratios compare like with like:

1. **sustained**: the Procfile's processes with default settings (gunicorn, one relay,
   two forking `hooklatch worker`); wrk sends unique signed events for a burst. Ingest
   req/s; the backlog when wrk returns (events still pending); seconds from then until
   the backlog is gone; end to end = events ÷ (first received → last processed). Every
   stored event must have run its handler exactly once.
2. **sustained, naive**: the same burst against the naive receiver, two stock forking
   `rq worker` processes running meanwhile. The wait for the backlog is capped; the rate
   is then over what was processed.
3. **outage**: gunicorn and the relay, no worker, for a burst; what the relay queued
   and what it held back in the outbox are counted. Then two workers start: drain rate = stored ÷
   (worker start → last processed), and over the events' own processed_at span.
4. **outage, naive**: the same with the naive receiver, then two `rq worker` processes,
   once with `SimpleWorker` and once with the default forking `Worker` (two bursts),
   each drain capped in time.
5. **long run**: the same two hooklatch workers through bursts until 100,000 events;
   their peak RSS in each burst, which must not grow with what they have processed.
6. **end to end at a steady rate** (`python -m bench`'s scenario 4, in this run): 200
   events a second, open loop, through the same processes; commit → handler start.
7. **unique ingest** (`python -m bench`'s scenario 1, in this run): hooklatch with its
   relay running against the naive receiver *without* its enqueue, the cost of a
   receiver that queues nothing.

`python -m bench.arrivals [--smoke]` prints the figures (and, in full mode, writes them
to bench/results/<date>-arrivals.json). Smoke runs fail only on an event lost or doubled
or a request not answered 200, never on figures.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import click
from redis import Redis
from rq import Queue

from bench import load
from bench.plans import Sized, sized
from bench.procs import BIN, ROOT, BenchError, MemorySampler, Procs, psql, scalar
from bench.scenarios import Bench, Plan, finish, prepared_bench, results_head

REDIS_URL = "redis://127.0.0.1:6379/10"
HANDLERS = "bench.handlers.write"  # one bench_effects row per event (its key: a double fails)
SIMPLE, FORKING = "rq.worker.SimpleWorker", "rq.worker.Worker"


@dataclass(frozen=True)
class ArrivalsPlan(Sized):
    burst_seconds: float = sized(20, smoke=3)
    connections: int = 16
    # Pre-signed requests per second of burst: more than either receiver takes here.
    pool_rps: int = sized(4000, smoke=3000)
    workers: int = 2
    # hooklatch must clear its backlog: past this, the run fails (events left unprocessed).
    clear_timeout_seconds: float = sized(600, smoke=180)
    naive_clear_cap_seconds: float = sized(120, smoke=5)
    naive_drain_cap_seconds: float = sized(60, smoke=4)
    settle_seconds: float = sized(2, smoke=1)
    # The long run: bursts with the same two workers running until this many events.
    long_run_events: int = sized(100_000, smoke=1000)


# -- helpers ------------------------------------------------------------------------------


def burst(bench: Bench, plan: ArrivalsPlan, name: str, base_url: str) -> tuple[Any, float]:
    """Unique signed events by wrk for the burst. Returns its result and the Unix time it
    returned at. Every request must be answered 200, and none sent twice."""
    items = load.signed_batch(name, int(plan.pool_rps * plan.burst_seconds))
    path = load.write_requests(bench.work_dir / f"{name}.req", bench.hook_path, items)
    del items
    result = load.run_wrk(
        base_url + bench.hook_path, path, connections=plan.connections, seconds=plan.burst_seconds
    )
    ended = time.time()
    path.unlink()
    if result.status_errors or result.socket_errors:
        raise BenchError(
            f"{name}: {result.status_errors} non-2xx answers, {result.socket_errors} socket errors"
        )
    if result.wrapped:
        raise BenchError(f"{name}: wrk ran out of unique requests; raise pool_rps")
    return result, ended


def check_stored(name: str, requests: int, stored: int, connections: int) -> None:
    """Every answered request is stored; at most one per connection was cut off at the end."""
    if not requests <= stored <= requests + connections:
        raise BenchError(f"{name}: {requests} requests answered but {stored} events stored")


def check_once(bench: Bench, name: str) -> dict[str, Any]:
    """Each stored event processed, its handler run exactly once; the times of the run."""
    row = psql(
        bench.database_url,
        """SELECT (SELECT count(*) FROM events),
                  (SELECT count(*) FROM events WHERE status = 'processed'),
                  (SELECT count(*) FROM attempts),
                  (SELECT count(*) FROM bench_effects),
                  (SELECT extract(epoch FROM min(received_at)) FROM events),
                  (SELECT extract(epoch FROM min(processed_at)) FROM events),
                  (SELECT extract(epoch FROM max(processed_at)) FROM events),
                  (SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM attempts)""",
    )[0]
    events, processed, attempts, effects = (int(x) for x in row[:4])
    if not events == processed == attempts == effects:
        raise BenchError(
            f"{name}: {events} events, {processed} processed, {attempts} attempts, "
            f"{effects} handler rows: each event must run exactly once"
        )
    first_received, first_processed, last_processed, attempts_span = (
        float(x) if x is not None else 0.0 for x in row[4:]
    )
    return {
        "events": events,
        "first_received": first_received,
        "first_processed": first_processed,
        "last_processed": last_processed,
        "attempts_span": attempts_span,
    }


def pending(bench: Bench) -> int:
    return int(scalar(bench.database_url, "SELECT count(*) FROM events WHERE status = 'pending'"))


def naive_unprocessed(bench: Bench) -> int:
    return int(
        scalar(bench.database_url, "SELECT count(*) FROM naive_events WHERE processed_at IS NULL")
    )


def wait_for(
    procs: Procs, predicate: Callable[[], bool], *, timeout: float, what: str
) -> float | None:
    """Seconds until predicate() held, or None past the timeout; a process that died fails."""
    started = time.monotonic()
    while True:
        procs.check_alive()
        if predicate():
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(0.1)


def drained(bench: Bench, procs: Procs, timeout: float, name: str) -> float:
    """Seconds until no event is pending; past ``timeout``, a BenchError."""
    seconds = wait_for(procs, lambda: pending(bench) == 0, timeout=timeout, what=name)
    if seconds is None:
        raise BenchError(f"{name}: events still pending after {timeout} s")
    return seconds


def start_workers(bench: Bench, procs: Procs, count: int, sampler: MemorySampler) -> None:
    env = bench.env(HOOKLATCH_HANDLERS=HANDLERS)
    for n in range(count):
        proc = procs.start(f"late-worker-{n}", [str(BIN / "hooklatch"), "worker"], env)
        sampler.watch(f"worker-{n}", proc.pid)


def start_naive_workers(
    bench: Bench, procs: Procs, count: int, worker_class: str, sampler: MemorySampler
) -> None:
    """Stock `rq worker` processes on the naive queue, as Bench.naive_drain starts them."""
    short = worker_class.rsplit(".", 1)[-1]
    for k in range(count):
        proc = procs.start(
            f"naive-{short}-{k}",
            [
                str(BIN / "rq"),
                "worker",
                "--url",
                bench.redis_url,
                "--worker-class",
                worker_class,
                "--path",
                str(ROOT),
                bench.naive_queue,
            ],
            bench.env(),
        )
        sampler.watch(f"worker-{k}", proc.pid)


def peaks(memory: dict[str, float]) -> dict[str, float]:
    """The largest worker process and the largest work horse (a forking worker's child)."""
    roles = [(role, mb) for role, mb in memory.items() if role.startswith("worker")]
    workers = [mb for role, mb in roles if not role.endswith(" child")]
    horses = [mb for role, mb in roles if role.endswith(" child")]
    return {
        "worker_peak_rss_mb": max(workers, default=0.0),
        "work_horse_peak_rss_mb": max(horses, default=0.0),
    }


def job_shape(sizes: list[int]) -> dict[str, Any]:
    if not sizes:
        return {"jobs": 0}
    return {
        "jobs": len(sizes),
        "events_per_job_mean": round(statistics.fmean(sizes), 1),
        "events_per_job_median": statistics.median(sizes),
        "events_per_job_min": min(sizes),
        "events_per_job_max": max(sizes),
        "single_event_jobs": sum(1 for size in sizes if size == 1),
    }


def finished_job_sizes(bench: Bench) -> list[int]:
    """Events per job, for every job the hooklatch workers finished (kept an hour)."""
    from rq.job import Job
    from rq.registry import FailedJobRegistry, FinishedJobRegistry

    from hooklatch.jobs import SERIALIZER

    redis = Redis.from_url(bench.redis_url)
    failed = FailedJobRegistry(bench.queue, connection=redis, serializer=SERIALIZER).count
    if failed:
        raise BenchError(f"{failed} hooklatch jobs failed")
    ids = FinishedJobRegistry(bench.queue, connection=redis, serializer=SERIALIZER).get_job_ids()
    sizes = []
    for start in range(0, len(ids), 500):
        for job in Job.fetch_many(ids[start : start + 500], redis, serializer=SERIALIZER):
            if job is not None:
                sizes.append(len(job.args[0]))
    return sizes


def rate(count: float, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


# -- scenarios ----------------------------------------------------------------------------


def sustained(bench: Bench, plan: ArrivalsPlan) -> dict[str, Any]:
    bench.reset()
    server = bench.hooklatch(workers=plan.workers, handlers=HANDLERS)
    with server as (procs, base_url):
        sampler = MemorySampler()
        for proc in procs.running:
            if proc.name.startswith("worker"):
                sampler.watch(proc.name, proc.pid)
        sampler.start()
        time.sleep(plan.settle_seconds)  # the relay and the workers up before the clock
        ingest, ended = burst(bench, plan, "sustained", base_url)
        backlog = pending(bench)
        drained(bench, procs, plan.clear_timeout_seconds, "sustained")
        memory = sampler.stop()
    times = check_once(bench, "sustained")
    check_stored("sustained", ingest.requests, times["events"], plan.connections)
    sizes = finished_job_sizes(bench)
    if sum(sizes) != times["events"]:
        raise BenchError(f"sustained: jobs carried {sum(sizes)} events of {times['events']}")
    e2e_seconds = times["last_processed"] - times["first_received"]
    result = {
        "ingest": ingest.as_json(),
        "stored": times["events"],
        "backlog_at_burst_end": backlog,
        "seconds_to_clear": round(max(0.0, times["last_processed"] - ended), 2),
        "end_to_end_seconds": round(e2e_seconds, 2),
        "end_to_end_events_per_second": rate(times["events"], e2e_seconds),
        "job_shape": job_shape(sizes),
        **peaks(memory),
    }
    bench.log(
        f"  sustained: ingest {ingest.rps:,.0f} req/s, backlog {backlog:,} at burst end, "
        f"cleared {result['seconds_to_clear']} s later; end to end "
        f"{result['end_to_end_events_per_second']:,}/s; {len(sizes):,} jobs "
        f"({result['job_shape'].get('events_per_job_mean')} events each on average)"
    )
    return result


def sustained_naive(bench: Bench, plan: ArrivalsPlan) -> dict[str, Any]:
    bench.reset()
    with bench.naive() as (procs, base_url):
        sampler = MemorySampler()
        start_naive_workers(bench, procs, plan.workers, FORKING, sampler)
        sampler.start()
        time.sleep(plan.settle_seconds)
        ingest, ended = burst(bench, plan, "sustained-naive", base_url)
        backlog = naive_unprocessed(bench)
        cleared = wait_for(
            procs,
            lambda: naive_unprocessed(bench) == 0,
            timeout=plan.naive_clear_cap_seconds,
            what="the naive backlog",
        )
        memory = sampler.stop()
    stored, processed, first_received, last_processed = psql(
        bench.database_url,
        "SELECT count(*), count(processed_at), extract(epoch FROM min(received_at)), "
        "extract(epoch FROM max(processed_at)) FROM naive_events",
    )[0]
    check_stored("sustained naive", ingest.requests, int(stored), plan.connections)
    processed = int(processed)
    e2e_seconds = float(last_processed or 0) - float(first_received or 0)
    result = {
        "worker_class": FORKING,
        "ingest": ingest.as_json(),
        "stored": int(stored),
        "backlog_at_burst_end": backlog,
        "stopped_at_time_cap": cleared is None,
        "seconds_to_clear": (
            round(max(0.0, float(last_processed) - ended), 2) if cleared is not None else None
        ),
        "processed": processed,
        "end_to_end_seconds": round(e2e_seconds, 2),
        "end_to_end_events_per_second": rate(processed, e2e_seconds),
        **peaks(memory),
    }
    clear = (
        f"cleared {result['seconds_to_clear']} s later"
        if cleared is not None
        else f"not cleared within {plan.naive_clear_cap_seconds:.0f} s ({processed:,} processed)"
    )
    bench.log(
        f"  sustained naive: ingest {ingest.rps:,.0f} req/s, backlog {backlog:,} at burst end, "
        f"{clear}; end to end {result['end_to_end_events_per_second']:,}/s"
    )
    return result


def outage(bench: Bench, plan: ArrivalsPlan) -> dict[str, Any]:
    bench.reset()
    with bench.hooklatch(workers=0, handlers=HANDLERS) as (procs, base_url):
        ingest, _ = burst(bench, plan, "outage", base_url)
        time.sleep(1)  # a request wrk cut off may commit after it returns; a relay pass
        stored = int(scalar(bench.database_url, "SELECT count(*) FROM events"))
        check_stored("outage", ingest.requests, stored, plan.connections)
        # With no worker taking jobs, the relay holds what came after its first jobs in
        # the outbox (HOOKLATCH_QUEUED_JOBS): what is queued and what waits, as found.
        queued = int(Queue(bench.queue, connection=Redis.from_url(bench.redis_url)).count)
        handed, held = (
            int(n)
            for n in psql(
                bench.database_url,
                "SELECT count(*) FILTER (WHERE job_id IS NOT NULL), "
                "count(*) FILTER (WHERE job_id IS NULL) FROM outbox",
            )[0]
        )
        jobs_before = int(scalar(bench.database_url, "SELECT count(DISTINCT job_id) FROM outbox"))
        if handed + held != stored or jobs_before != queued:
            raise BenchError(
                f"outage: {stored} events, {handed} outbox rows in {jobs_before} jobs and "
                f"{held} waiting, {queued} jobs queued"
            )
        sampler = MemorySampler()
        workers_started = time.time()
        start_workers(bench, procs, plan.workers, sampler)
        sampler.start()
        drained(bench, procs, plan.clear_timeout_seconds, "outage")
        memory = sampler.stop()
    times = check_once(bench, "outage")
    sizes = finished_job_sizes(bench)  # the jobs the workers ran
    wall = times["last_processed"] - workers_started
    span = times["last_processed"] - times["first_processed"]
    result = {
        "ingest": ingest.as_json(),
        "stored": stored,
        "before_workers": {"jobs_queued": queued, "events_in_them": handed, "held": held},
        "job_shape": job_shape(sizes),
        "drain_seconds_from_worker_start": round(wall, 2),
        "drain_events_per_second": rate(stored, wall),
        "drain_events_per_second_processed_at_span": rate(stored - 1, span),
        "drain_events_per_second_attempts_span": rate(stored, times["attempts_span"]),
        **peaks(memory),
    }
    bench.log(
        f"  outage: ingest {ingest.rps:,.0f} req/s, {stored:,} stored ({queued:,} jobs queued "
        f"with {handed:,} events, {held:,} held in the outbox); run in {len(sizes):,} jobs "
        f"({result['job_shape'].get('events_per_job_mean')} events each); drain "
        f"{result['drain_events_per_second']:,}/s from worker start "
        f"({result['drain_events_per_second_processed_at_span']:,}/s over processed_at)"
    )
    return result


def long_run(bench: Bench, plan: ArrivalsPlan) -> dict[str, Any]:
    """The same two workers through bursts until ``long_run_events`` events: their memory
    after each burst must not grow with what they have processed."""
    bench.reset()
    rounds: list[dict[str, Any]] = []
    with bench.hooklatch(workers=plan.workers, handlers=HANDLERS) as (procs, base_url):
        workers = [proc for proc in procs.running if proc.name.startswith("worker")]
        time.sleep(plan.settle_seconds)
        processed = 0
        while processed < plan.long_run_events:
            sampler = MemorySampler()
            for proc in workers:
                sampler.watch(proc.name, proc.pid)
            sampler.start()
            burst(bench, plan, f"long-{len(rounds)}", base_url)
            drained(bench, procs, plan.clear_timeout_seconds, "long run")
            processed = int(scalar(bench.database_url, "SELECT count(*) FROM events"))
            rounds.append({"events_so_far": processed, **peaks(sampler.stop())})
    check_once(bench, "long run")
    first, last = rounds[0], rounds[-1]
    result = {
        "events": processed,
        "rounds": rounds,
        "worker_peak_rss_mb": max(r["worker_peak_rss_mb"] for r in rounds),
        "work_horse_peak_rss_mb": max(r["work_horse_peak_rss_mb"] for r in rounds),
        "worker_rss_growth_mb": round(last["worker_peak_rss_mb"] - first["worker_peak_rss_mb"], 1),
    }
    bench.log(
        f"  long run: {processed:,} events in {len(rounds)} bursts; worker peak RSS "
        f"{first['worker_peak_rss_mb']} MB in the first, {last['worker_peak_rss_mb']} MB in "
        f"the last; work horse at most {result['work_horse_peak_rss_mb']} MB"
    )
    return result


def outage_naive(bench: Bench, plan: ArrivalsPlan, worker_class: str) -> dict[str, Any]:
    bench.reset()
    short = worker_class.rsplit(".", 1)[-1]
    with bench.naive() as (procs, base_url):
        ingest, _ = burst(bench, plan, f"outage-naive-{short}", base_url)
        time.sleep(1)  # a request wrk cut off may commit after it returns
        stored = int(scalar(bench.database_url, "SELECT count(*) FROM naive_events"))
        check_stored(f"outage naive {short}", ingest.requests, stored, plan.connections)
        queued = int(Queue(bench.naive_queue, connection=Redis.from_url(bench.redis_url)).count)
        if queued != stored:
            raise BenchError(f"outage naive: {stored} events stored, {queued} jobs queued")
        sampler = MemorySampler()
        workers_started = time.time()
        start_naive_workers(bench, procs, plan.workers, worker_class, sampler)
        sampler.start()
        drained = wait_for(
            procs,
            lambda: naive_unprocessed(bench) == 0,
            timeout=plan.naive_drain_cap_seconds,
            what="the naive workers",
        )
        memory = sampler.stop()
    processed, first, last = psql(
        bench.database_url,
        "SELECT count(processed_at), extract(epoch FROM min(processed_at)), "
        "extract(epoch FROM max(processed_at)) FROM naive_events",
    )[0]
    processed = int(processed)
    wall = float(last or workers_started) - workers_started
    span = float(last or 0) - float(first or 0)
    result = {
        "worker_class": worker_class,
        "ingest": ingest.as_json(),
        "stored": stored,
        "jobs_queued": queued,
        "processed": processed,
        "stopped_at_time_cap": drained is None,
        "drain_seconds_from_worker_start": round(wall, 2),
        "drain_events_per_second": rate(processed, wall),
        "drain_events_per_second_processed_at_span": rate(processed - 1, span),
        **peaks(memory),
    }
    bench.log(
        f"  outage naive ({short}): ingest {ingest.rps:,.0f} req/s, {stored:,} stored; "
        f"{processed:,} processed{' (capped)' if drained is None else ''}, "
        f"{result['drain_events_per_second']:,}/s from worker start"
    )
    return result


def ratios(s: dict[str, Any]) -> dict[str, float | None]:
    def over(a: float, b: float) -> float | None:
        return round(a / b, 3) if b else None

    hook, naive = s["sustained"], s["sustained_naive"]
    return {
        "sustained_end_to_end_over_ingest": over(
            hook["end_to_end_events_per_second"], hook["ingest"]["rps"]
        ),
        "sustained_end_to_end_hooklatch_over_naive": over(
            hook["end_to_end_events_per_second"], naive["end_to_end_events_per_second"]
        ),
        "outage_drain_over_naive_simple_worker_drain": over(
            s["outage"]["drain_events_per_second"],
            s["outage_naive_simple_worker"]["drain_events_per_second"],
        ),
        "outage_drain_over_naive_forking_worker_drain": over(
            s["outage"]["drain_events_per_second"],
            s["outage_naive_worker"]["drain_events_per_second"],
        ),
        "ingest_hooklatch_over_naive_no_enqueue": over(
            s["ingest"]["hooklatch"]["unique"]["rps"],
            s["ingest"]["naive_no_enqueue"]["unique"]["rps"],
        ),
        # The backlog left when the burst ends, in seconds of that burst's arrivals.
        "backlog_seconds_of_ingest": over(hook["backlog_at_burst_end"], hook["ingest"]["rps"]),
        "naive_backlog_seconds_of_ingest": over(
            naive["backlog_at_burst_end"], naive["ingest"]["rps"]
        ),
    }


def summary(results: dict[str, Any]) -> list[str]:
    s, r = results["scenarios"], results["ratios"]
    hook, naive, out = s["sustained"], s["sustained_naive"], s["outage"]
    simple, forking = s["outage_naive_simple_worker"], s["outage_naive_worker"]
    naive_clear = (
        f"{naive['seconds_to_clear']} s"
        if naive["seconds_to_clear"] is not None
        else f"> {results['plan']['naive_clear_cap_seconds']:.0f} s (capped)"
    )
    return [
        f"sustained: ingest {hook['ingest']['rps']:,.0f}/s, "
        f"backlog {hook['backlog_at_burst_end']:,} ({r['backlog_seconds_of_ingest']} s of ingest),"
        f" cleared in {hook['seconds_to_clear']} s,"
        f" end to end {hook['end_to_end_events_per_second']:,}/s"
        f" = {r['sustained_end_to_end_over_ingest']} × ingest",
        f"sustained naive: ingest {naive['ingest']['rps']:,.0f}/s, backlog "
        f"{naive['backlog_at_burst_end']:,}, cleared in {naive_clear}, end to end "
        f"{naive['end_to_end_events_per_second']:,}/s; hooklatch ÷ naive "
        f"{r['sustained_end_to_end_hooklatch_over_naive']}",
        f"sustained jobs: {hook['job_shape']['jobs']:,}, "
        f"{hook['job_shape'].get('events_per_job_mean')} events each on average "
        f"(median {hook['job_shape'].get('events_per_job_median')}, "
        f"max {hook['job_shape'].get('events_per_job_max')})",
        f"outage: {out['stored']:,} stored in {out['job_shape']['jobs']:,} jobs "
        f"({out['job_shape'].get('events_per_job_mean')} events each, max "
        f"{out['job_shape'].get('events_per_job_max')}); drain "
        f"{out['drain_events_per_second']:,}/s from worker start",
        f"outage naive: SimpleWorker {simple['drain_events_per_second']:,}/s, forking Worker "
        f"{forking['drain_events_per_second']:,}/s; hooklatch ÷ SimpleWorker "
        f"{r['outage_drain_over_naive_simple_worker_drain']}",
        f"end to end at {s['end_to_end']['rate_per_second']:.0f}/s: commit → handler start "
        f"p50 {s['end_to_end']['commit_to_handler_p50_ms']} ms, "
        f"p99 {s['end_to_end']['commit_to_handler_p99_ms']} ms",
        f"unique ingest: hooklatch {s['ingest']['hooklatch']['unique']['rps']:,.0f}/s, naive "
        f"without enqueue {s['ingest']['naive_no_enqueue']['unique']['rps']:,.0f}/s "
        f"({r['ingest_hooklatch_over_naive_no_enqueue']} ×)",
        f"long run: {s['long_run']['events']:,} events, worker peak RSS "
        f"{s['long_run']['rounds'][0]['worker_peak_rss_mb']} MB in the first burst, "
        f"{s['long_run']['rounds'][-1]['worker_peak_rss_mb']} MB in the last",
        f"peak RSS: hooklatch worker {results['worker_peak_rss_mb']['hooklatch_worker']} MB, "
        f"work horse {results['worker_peak_rss_mb']['hooklatch_work_horse']} MB; "
        f"rq worker {results['worker_peak_rss_mb']['naive_worker']} MB",
    ]


@click.command()
@click.option("--smoke", is_flag=True, help="A few seconds per phase: checks, not figures.")
def main(smoke: bool) -> None:
    plan = ArrivalsPlan.for_run(smoke)
    load_before = os.getloadavg()
    with prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench:
        s: dict[str, Any] = {}
        bench.log("arrivals: sustained (hooklatch)")
        s["sustained"] = sustained(bench, plan)  # first: it sets the web worker count
        bench.log("arrivals: sustained (naive)")
        s["sustained_naive"] = sustained_naive(bench, plan)
        bench.log("arrivals: backlog after an outage (hooklatch)")
        s["outage"] = outage(bench, plan)
        bench.log("arrivals: backlog after an outage (naive)")
        s["outage_naive_simple_worker"] = outage_naive(bench, plan, SIMPLE)
        s["outage_naive_worker"] = outage_naive(bench, plan, FORKING)
        bench.log("arrivals: end to end at a steady rate")
        s["end_to_end"] = bench.end_to_end()
        bench.log("arrivals: unique ingest, hooklatch against the naive receiver without enqueue")
        s["ingest"] = {
            "hooklatch": bench.ingest("hooklatch", bench.hooklatch(), bench.stored_hooklatch),
            "naive_no_enqueue": bench.ingest(
                "naive-no-enqueue", bench.naive(enqueue=False), bench.stored_naive
            ),
        }
        bench.log("arrivals: long run (memory)")
        s["long_run"] = long_run(bench, plan)
        web_workers = bench.web_workers
    hooklatch_runs = (s["sustained"], s["outage"], s["long_run"])
    naive_runs = (s["sustained_naive"], s["outage_naive_simple_worker"], s["outage_naive_worker"])
    results: dict[str, Any] = {
        **results_head(smoke, load_before),
        "plan": asdict(plan),
        "web_workers": web_workers,
        "handlers": HANDLERS,
        "scenarios": s,
        "ratios": ratios(s),
        "worker_peak_rss_mb": {
            "hooklatch_worker": max(x["worker_peak_rss_mb"] for x in hooklatch_runs),
            "hooklatch_work_horse": max(x["work_horse_peak_rss_mb"] for x in hooklatch_runs),
            "naive_worker": max(x["worker_peak_rss_mb"] for x in naive_runs),
            "naive_work_horse": max(x["work_horse_peak_rss_mb"] for x in naive_runs),
        },
    }
    finish(results, summary(results), name="arrivals", smoke=smoke)


if __name__ == "__main__":
    main()
