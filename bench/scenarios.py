"""The scenarios: ingest (unique and duplicate), drain, end to end, memory, the lost-job sweep
behind a deep queue, and the baselines."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from cryptography.fernet import Fernet
from redis import Redis
from rq import Queue

from bench import load
from bench.baselines.naive_jobs import process_event as naive_process_event
from bench.baselines.naive_receiver import SCHEMA as NAIVE_SCHEMA
from bench.plans import Sized, sized
from bench.procs import (
    BIN,
    ROOT,
    BenchError,
    MemorySampler,
    Proc,
    Procs,
    flush_redis,
    free_port,
    psql,
    scalar,
    scratch_database,
    wait_http,
    wait_until,
)

CEILING_SQL = Path(__file__).resolve().parent / "baselines" / "ceiling.sql"
ENDPOINT_NAME = "bench"


@dataclass(frozen=True)
class Plan(Sized):
    """How long and how big each scenario is. The smoke plan runs everything in seconds."""

    smoke: bool = sized(False, smoke=True)
    connections: int = 16
    ingest_seconds: float = sized(10, smoke=2)
    warmup_seconds: float = sized(3, smoke=1)
    # Pre-signed requests per wrk run: more than the fastest receiver can take in that time.
    max_rps: int = 6000
    drain_events: int = sized(50_000, smoke=1000)
    naive_simple_events: int = sized(5000, smoke=200)
    naive_fork_events: int = sized(400, smoke=20)
    naive_cap_seconds: float = sized(30, smoke=10)
    workers: int = 2
    e2e_rate: float = sized(200, smoke=50)
    e2e_seconds: float = sized(30, smoke=3)
    pgbench_seconds: float = sized(10, smoke=2)
    sweep_jobs: int = sized(10_000, smoke=300)
    sweep_rate: float = sized(800, smoke=300)


@dataclass
class Bench:
    plan: Plan
    database_url: str
    redis_url: str
    work_dir: Path
    queue: str = "hooklatch-bench"
    naive_queue: str = "naive-bench"
    key: str = field(default_factory=lambda: Fernet.generate_key().decode())
    endpoint_id: str = ""
    web_workers: int = 0
    log: Callable[[str], None] = print

    # -- set-up ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Schema (hooklatch's migrations, the naive table, the handler's table) and an endpoint."""
        subprocess.run(
            [str(BIN / "hooklatch"), "db", "upgrade"], env=self.env(), check=True, cwd=ROOT
        )
        psql(self.database_url, NAIVE_SCHEMA)
        self.endpoint_id = load.stripe_endpoint(self.env(), ENDPOINT_NAME)

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("HOOKLATCH_", "DATABASE_URL", "REDIS_URL"))
        }
        env.update(
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis_url,
            HOOKLATCH_SECRET_KEYS=self.key,
            HOOKLATCH_QUEUE=self.queue,
            PYTHONPATH=str(ROOT),
            PYTHONUNBUFFERED="1",
            **extra,
        )
        return env

    def reset(self) -> None:
        psql(
            self.database_url,
            "TRUNCATE attempts, outbox, replays, replay_batch_items, replay_batches, "
            "ordering_keys, forwards, events, activity, audit_log, bench_effects, naive_events "
            "RESTART IDENTITY",
        )
        flush_redis(self.redis_url)

    @property
    def hook_path(self) -> str:
        return f"/hooks/{self.endpoint_id}"

    # -- processes ----------------------------------------------------------------------------

    @contextmanager
    def hooklatch(
        self,
        *,
        web: bool = True,
        relay: bool = True,
        workers: int = 0,
        handlers: str = "",
        port: int | None = None,
        **env_extra: str,
    ) -> Iterator[tuple[Procs, str]]:
        """gunicorn (as the Procfile runs it, on ``port`` or a free one), the relay and
        workers."""
        env = self.env(HOOKLATCH_HANDLERS=handlers, **env_extra)
        port = free_port() if port is None else port
        with Procs(self.work_dir) as procs:
            if web:
                self.start_web(procs, env, port)
            if relay:
                procs.start("relay", [str(BIN / "hooklatch"), "relay"], env)
            for n in range(workers):
                procs.start(f"worker-{n}", [str(BIN / "hooklatch"), "worker"], env)
            yield procs, f"http://127.0.0.1:{port}"

    def start_web(self, procs: Procs, env: dict[str, str], port: int) -> Proc:
        """gunicorn as the Procfile runs it, on ``port``, once it answers and its workers
        have started."""
        gunicorn = procs.start(
            "web",
            [str(BIN / "gunicorn"), "wsgi:app", "-c", "gunicorn.conf.py"],
            {**env, "HOST": "127.0.0.1", "PORT": str(port)},
        )
        wait_http(f"http://127.0.0.1:{port}/healthz", gunicorn)
        self.web_workers = _wait_children(gunicorn.pid)
        return gunicorn

    @contextmanager
    def naive(self, *, enqueue: bool = True) -> Iterator[tuple[Procs, str]]:
        env = self.env(
            STRIPE_WEBHOOK_SECRET=load.SECRET,
            NAIVE_QUEUE=self.naive_queue,
            NAIVE_ENQUEUE="1" if enqueue else "0",
        )
        port = free_port()
        with Procs(self.work_dir) as procs:
            gunicorn = procs.start(
                "naive-web",
                [
                    str(BIN / "gunicorn"),
                    "bench.baselines.naive_receiver:app",
                    # gunicorn reads ./gunicorn.conf.py by default; the naive receiver's
                    # one connection per process wants the sync workers it was built for.
                    "--worker-class",
                    "sync",
                    "--workers",
                    str(self.web_workers),
                    "--bind",
                    f"127.0.0.1:{port}",
                ],
                env,
            )
            wait_http(f"http://127.0.0.1:{port}/hooks/none", gunicorn)
            yield procs, f"http://127.0.0.1:{port}"

    # -- scenario 1, 2 and 5: ingest ------------------------------------------------------

    def ingest(self, name: str, server: Any, stored: Callable[[list[str]], set[str]]) -> dict:
        """Unique events, then 100 % repeats of them, then a half-and-half mix."""
        plan = self.plan
        pool = plan.max_rps * int(plan.ingest_seconds)
        self.reset()
        with server as (procs, base_url):
            sampler = MemorySampler()
            sampler.watch("web", procs.running[0].pid)
            sampler.start()
            url = base_url + self.hook_path

            def run(label: str, items: list[load.Signed]) -> load.WrkResult:
                path = load.write_requests(
                    self.work_dir / f"{name}-{label}.req", self.hook_path, items
                )
                result = load.run_wrk(
                    url, path, connections=plan.connections, seconds=self._seconds(label)
                )
                path.unlink()
                procs.check_alive()
                if result.status_errors or result.socket_errors:
                    raise BenchError(
                        f"{name} {label}: {result.status_errors} non-2xx answers, "
                        f"{result.socket_errors} socket errors"
                    )
                self.log(
                    f"  {name} {label}: {result.rps:,.0f} req/s, p50 {result.p50_ms:.1f} ms, "
                    f"p99 {result.p99_ms:.1f} ms, wrk used {result.loadgen_cpu:.2f} cores"
                )
                return result

            run("warmup", load.signed_batch(f"{name}w", pool // 2))
            unique_items = load.signed_batch(f"{name}u", pool)
            unique = run("unique", unique_items)
            if unique.wrapped:
                raise BenchError(f"{name}: wrk ran out of unique requests; raise Plan.max_rps")
            kept = stored([item.external_id for item in unique_items])
            # Every answered request is stored; at most one per connection was cut off at the end.
            if not unique.requests <= len(kept) <= unique.requests + plan.connections:
                raise BenchError(
                    f"{name}: {unique.requests} requests answered but {len(kept)} events stored"
                )
            repeats = [item for item in unique_items if item.external_id in kept]
            before = len(stored([item.external_id for item in repeats]))
            duplicates = run("duplicates-100", repeats)
            fresh = load.signed_batch(f"{name}f", len(repeats))
            mixed_items = [x for pair in zip(fresh, repeats, strict=True) for x in pair]
            mixed = run("duplicates-50", mixed_items)
            if len(stored([item.external_id for item in repeats])) != before:
                raise BenchError(f"{name}: a repeated event was stored twice")
            memory = sampler.stop()
        return {
            "unique": unique.as_json(),
            "duplicates_100": duplicates.as_json(),
            "duplicates_50": mixed.as_json(),
            "web_worker_peak_rss_mb": memory.get("web child", 0.0),
        }

    def _seconds(self, label: str) -> float:
        return self.plan.warmup_seconds if label == "warmup" else self.plan.ingest_seconds

    def stored_hooklatch(self, external_ids: list[str]) -> set[str]:
        rows = psql(
            self.database_url,
            "SELECT external_id FROM events WHERE endpoint_id = %s AND external_id = ANY(%s)",
            (self.endpoint_id, external_ids),
        )
        return {str(row[0]) for row in rows}

    def stored_naive(self, external_ids: list[str]) -> set[str]:
        rows = psql(
            self.database_url,
            "SELECT external_id FROM naive_events WHERE external_id = ANY(%s)",
            (external_ids,),
        )
        return {str(row[0]) for row in rows}

    # -- the ceiling ----------------------------------------------------------------------

    def ceiling(self) -> dict:
        """pgbench running hooklatch's insert-plus-outbox transaction at the same concurrency."""
        self.reset()
        body = load.sign("evt_pgbench_body").body
        args = [
            "pgbench",
            "--no-vacuum",
            "--protocol=prepared",
            f"--client={self.plan.connections}",
            "--jobs=2",
            f"--time={max(1, round(self.plan.pgbench_seconds))}",
            f"--file={CEILING_SQL}",
            f"--define=endpoint={self.endpoint_id}",
            f"--define=body={body.decode()}",
            f"--define=sha={hashlib.sha256(body).hexdigest()}",
            "--define=headers=" + json.dumps({"content-type": "application/json"}),
            self.database_url,
        ]
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        tps = re.search(r"tps = ([\d.]+) \(without initial connection time\)", done.stdout)
        latency = re.search(r"latency average = ([\d.]+) ms", done.stdout)
        failed = re.search(r"number of failed transactions: (\d+)", done.stdout)
        if done.returncode != 0 or tps is None or (failed and int(failed.group(1))):
            raise BenchError(f"pgbench failed: {done.stderr or done.stdout}")
        result = {
            "clients": self.plan.connections,
            "tps": round(float(tps.group(1)), 1),
            "latency_avg_ms": float(latency.group(1)) if latency else None,
        }
        self.log(f"  pgbench ceiling: {result['tps']:,.0f} tps at {self.plan.connections} clients")
        return result

    # -- scenario 3: drain --------------------------------------------------------------------

    def drain(self, handler: str) -> dict:
        """N pending events stored (with their outbox rows) before any worker starts."""
        n = self.plan.drain_events
        self.reset()
        body = load.sign("evt_drain_body").body
        psql(
            self.database_url,
            """
            INSERT INTO events (endpoint_id, provider, external_id, type, occurred_at,
                received_at, status, attempts, next_attempt_at, body, headers, body_sha256,
                mismatched_duplicates)
            SELECT %s, 'stripe', 'evt_d_' || g, 'invoice.paid', now(), now(), 'pending', 0,
                now(), %s, %s, %s, 0
            FROM generate_series(1, %s) AS g;
            INSERT INTO outbox (event_id, created_at) SELECT id, now() FROM events;
            """,
            (
                self.endpoint_id,
                body,
                json.dumps({"content-type": "application/json"}),
                hashlib.sha256(body).hexdigest(),
                n,
            ),
        )
        with self.hooklatch(web=False, workers=self.plan.workers, handlers=handler) as (procs, _):
            sampler = MemorySampler()
            for proc in procs.running:
                if proc.name.startswith("worker"):
                    sampler.watch("worker", proc.pid)
            sampler.start()
            started = time.monotonic()
            wall = self._wait_for(
                procs,
                lambda: (
                    scalar(
                        self.database_url, "SELECT count(*) FROM events WHERE status = 'pending'"
                    )
                    == 0
                ),
                timeout=max(120, n / 50),
                what=f"{n} events to be processed",
            )
            memory = sampler.stop()
        counts = psql(
            self.database_url,
            """SELECT (SELECT count(*) FROM events WHERE status = 'processed'),
                      (SELECT count(*) FROM attempts),
                      (SELECT count(*) FROM bench_effects),
                      extract(epoch FROM max(processed_at) - min(processed_at))
               FROM events""",
        )[0]
        processed, attempts, effects, span = (
            int(counts[0]),
            int(counts[1]),
            int(counts[2]),
            float(counts[3]),
        )
        writes = handler.endswith("write")
        if processed != n or attempts != n or (writes and effects != n):
            raise BenchError(
                f"drain {handler}: {n} events, {processed} processed, {attempts} attempts, "
                f"{effects} handler rows: each event must run exactly once"
            )
        rate = (n - 1) / span
        self.log(f"  drain ({handler}): {rate:,.0f} events/s, {n} events in {wall:.1f} s wall")
        del started
        return {
            "events": n,
            "workers": self.plan.workers,
            "events_per_second": round(rate, 1),
            "wall_seconds_from_start": round(wall, 2),
            "worker_peak_rss_mb": memory.get("worker", 0.0),
            "work_horse_peak_rss_mb": memory.get("worker child", 0.0),
        }

    def naive_drain(self, worker_class: str, n: int) -> dict:
        """One RQ job per event, already queued; stock `rq worker` processes, capped in time."""
        self.reset()
        psql(
            self.database_url,
            "INSERT INTO naive_events (external_id, type, body) "
            "SELECT 'evt_nd_' || g, 'invoice.paid', %s FROM generate_series(1, %s) AS g",
            (load.sign("evt_naive_body").body, n),
        )
        ids = [int(row[0]) for row in psql(self.database_url, "SELECT id FROM naive_events")]
        redis = Redis.from_url(self.redis_url)
        queue = Queue(self.naive_queue, connection=redis)
        for start in range(0, len(ids), 1000):
            with redis.pipeline() as pipeline:
                queue.enqueue_many(
                    [
                        Queue.prepare_data(naive_process_event, args=(event_id,))
                        for event_id in ids[start : start + 1000]
                    ],
                    pipeline=pipeline,
                )
                pipeline.execute()
        env = self.env()
        with Procs(self.work_dir) as procs:
            for k in range(self.plan.workers):
                procs.start(
                    f"naive-{worker_class.rsplit('.', 1)[-1]}-{k}",
                    [
                        str(BIN / "rq"),
                        "worker",
                        "--url",
                        self.redis_url,
                        "--worker-class",
                        worker_class,
                        "--path",
                        str(ROOT),
                        self.naive_queue,
                    ],
                    env,
                )
            try:
                self._wait_for(
                    procs,
                    lambda: (
                        scalar(
                            self.database_url,
                            "SELECT count(*) FROM naive_events WHERE processed_at IS NULL",
                        )
                        == 0
                    ),
                    timeout=self.plan.naive_cap_seconds,
                    what="the naive workers",
                )
                capped = False
            except BenchError:
                capped = True  # slow by design: the rate over what it did is what counts
        processed, span = psql(
            self.database_url,
            "SELECT count(processed_at), extract(epoch FROM max(processed_at) - min(processed_at)) "
            "FROM naive_events",
        )[0]
        processed = int(processed)
        if processed < 2:
            raise BenchError(f"naive {worker_class}: processed {processed} events")
        rate = (processed - 1) / float(span)
        self.log(f"  naive drain ({worker_class}): {rate:,.1f} events/s over {processed} events")
        return {
            "worker_class": worker_class,
            "workers": self.plan.workers,
            "events": processed,
            "stopped_at_time_cap": capped,
            "events_per_second": round(rate, 1),
        }

    # -- scenario 4: end to end -----------------------------------------------------------

    def end_to_end(self) -> dict:
        """A fixed open-loop rate; time from the event's commit to its handler's start."""
        plan = self.plan
        self.reset()
        count = int(plan.e2e_rate * plan.e2e_seconds)
        with self.hooklatch(workers=plan.workers, handlers="bench.handlers.write") as (
            procs,
            base_url,
        ):
            sampler = MemorySampler()
            sampler.watch("web", procs.running[0].pid)
            for proc in procs.running:
                if proc.name.startswith("worker"):
                    sampler.watch("worker", proc.pid)
            sampler.start()
            # Let the workers and the relay come up before the clock starts.
            time.sleep(2)
            items = load.signed_batch("e2e", count)
            sent = load.open_loop(base_url + self.hook_path, items, rate=plan.e2e_rate)
            if sent.failures:
                raise BenchError(f"end to end: {sent.failures} requests were not answered 200")
            self._wait_for(
                procs,
                lambda: scalar(self.database_url, "SELECT count(*) FROM bench_effects") >= count,
                timeout=60,
                what="every event's handler",
            )
            memory = sampler.stop()
        rows = psql(
            self.database_url,
            "SELECT (b.started_at - extract(epoch FROM e.received_at)) * 1000 "
            "FROM events e JOIN bench_effects b ON b.event_id = e.id",
        )
        lags = [float(row[0]) for row in rows]
        if len(lags) != count:
            raise BenchError(f"end to end: {count} sent, {len(lags)} handled")
        result = {
            "rate_per_second": plan.e2e_rate,
            "events": count,
            "achieved_rate": round(sent.sent / sent.seconds, 1),
            "commit_to_handler_p50_ms": round(load.percentile(lags, 50), 1),
            "commit_to_handler_p99_ms": round(load.percentile(lags, 99), 1),
            "commit_to_handler_max_ms": round(max(lags), 1),
            "response_p50_ms": round(sent.response_p50_ms, 1),
            "response_p99_ms": round(sent.response_p99_ms, 1),
            "web_worker_peak_rss_mb": memory.get("web child", 0.0),
            "worker_peak_rss_mb": memory.get("worker", 0.0),
            "work_horse_peak_rss_mb": memory.get("worker child", 0.0),
        }
        self.log(
            f"  end to end at {plan.e2e_rate:.0f}/s: p50 {result['commit_to_handler_p50_ms']} ms, "
            f"p99 {result['commit_to_handler_p99_ms']} ms"
        )
        return result

    # -- scenario 6: the lost-job sweep behind a deep queue ----------------------------------

    def sweep(self) -> dict:
        """What one pass of the relay's lost-job sweep costs with many jobs waiting.

        Events arrive through gunicorn while no worker runs, and the relay (one event per
        job here, and no limit on the jobs waiting: by default it would hold them back in
        the outbox) queues a job for each: a queue as deep as many relays, or a limit
        raised, can make it. Then the relay's own sweep runs in this process,
        with the dispatch grace at 0 so that every job is a candidate. It must leave the
        healthy backlog alone. The worst case follows: the oldest jobs taken off the queue
        as workers that died would leave them, so that every check scans the whole list.
        """
        from hooklatch.assembly import build_runtime
        from hooklatch.jobs import SERIALIZER
        from hooklatch.settings import Settings
        from hooklatch.workers.relay.loop import Relay
        from hooklatch.workers.relay.sinks import RQSink
        from hooklatch.workers.relay.sweep import SWEEP_JOBS

        plan = self.plan
        n = plan.sweep_jobs
        self.reset()
        redis = Redis.from_url(self.redis_url)
        queue = Queue(self.queue, connection=redis, serializer=SERIALIZER)
        runtime = build_runtime(Settings.from_env(self.env(HOOKLATCH_DISPATCH_GRACE_SECONDS="0")))
        relay = Relay(runtime, RQSink(runtime, redis))
        empty = [_timed(relay.sweep_once)[1] for _ in range(5)]
        with self.hooklatch(
            workers=0, HOOKLATCH_JOB_SIZE="1", HOOKLATCH_QUEUED_JOBS=str(n + 1)
        ) as (procs, base_url):
            items = load.signed_batch("sweep", n)
            sent = load.open_loop(base_url + self.hook_path, items, rate=plan.sweep_rate)
            if sent.failures:
                raise BenchError(f"sweep: {sent.failures} requests were not answered 200")
            self._wait_for(
                procs, lambda: queue.count >= n, timeout=120, what=f"{n} jobs in the queue"
            )
        redis.config_resetstat()
        passes = [_timed(relay.sweep_once) for _ in range(20)]
        if any(moved for moved, _ in passes) or queue.count != n:
            raise BenchError("sweep: a healthy queued backlog was dispatched again")
        healthy = [seconds for _, seconds in passes]
        taken = min(SWEEP_JOBS, n)
        for _ in range(taken):
            redis.lmove(queue.key, queue.intermediate_queue_key)
        relay = Relay(runtime, RQSink(runtime, redis))
        first_seen, worst = _timed(relay.sweep_once)
        lposes = redis.info("commandstats").get("cmdstat_lpos", {})
        runtime.dispose()
        if first_seen:
            raise BenchError("sweep: jobs taken off the queue were called lost at first sight")
        result = {
            "jobs_waiting": n,
            "sweep_interval_seconds": Settings().sweep_interval_seconds,
            "empty_pass_ms": round(1000 * load.percentile(empty, 50), 2),
            "pass_p50_ms": round(1000 * load.percentile(healthy, 50), 2),
            "pass_max_ms": round(1000 * max(healthy), 2),
            "worst_pass_ms": round(1000 * worst, 2),
            "worst_pass_candidates": taken,
            "lpos_calls": int(lposes.get("calls", 0)),
            "lpos_usec_per_call": float(lposes.get("usec_per_call", 0.0)),
        }
        self.log(
            f"  sweep, {n:,} jobs waiting: {result['pass_p50_ms']} ms per pass (max "
            f"{result['pass_max_ms']}), {result['worst_pass_ms']} ms when the {taken} oldest "
            f"are taken off the queue; LPOS {result['lpos_usec_per_call']} µs per call"
        )
        return result

    def _wait_for(
        self, procs: Procs, predicate: Callable[[], bool], *, timeout: float, what: str
    ) -> float:
        def check() -> bool:
            procs.check_alive()
            return predicate()

        return wait_until(check, timeout=timeout, what=what)


def _timed(call: Callable[[], int]) -> tuple[int, float]:
    started = time.perf_counter()
    result = call()
    return result, time.perf_counter() - started


def _wait_children(pid: int, timeout: float = 20) -> int:
    """gunicorn's worker count, once they have all started."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    count = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        count = len(path.read_text().split())
        if count:
            time.sleep(0.5)
            again = len(path.read_text().split())
            if again == count:
                return count
        time.sleep(0.1)
    return count


@contextmanager
def prepared_bench(plan: Plan, redis_url: str) -> Iterator[Bench]:
    """A Bench on a scratch database of BENCH_PG_ADMIN_URL's server and on BENCH_REDIS_URL
    (default ``redis_url``: a Redis database of its own, emptied between runs), schema and
    endpoint in place; the database is dropped afterwards. A BenchError raised inside
    ends the command with its message."""
    admin_url = os.environ.get(
        "BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    with (
        tempfile.TemporaryDirectory(prefix="hooklatch-bench-") as scratch,
        scratch_database(admin_url) as database_url,
    ):
        bench = Bench(
            plan, database_url, os.environ.get("BENCH_REDIS_URL", redis_url), Path(scratch)
        )
        bench.prepare()
        try:
            yield bench
        except BenchError as exc:
            raise click.ClickException(str(exc)) from exc


def keep_results(results: dict[str, Any], name: str) -> None:
    """Write ``results`` to bench/results/<date>-<name>.json, and name the file in them."""
    path = ROOT / "bench" / "results" / f"{results['date']}-{name}.json"
    results["file"] = str(path.relative_to(ROOT))
    path.write_text(json.dumps(results, indent=2) + "\n")


def results_head(smoke: bool, load_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a scenario's results begin with: the day, whether it was a smoke run, the
    machine's cores, and its load averages as the run began."""
    return {
        "date": dt.date.today().isoformat(),
        "smoke": smoke,
        "cores": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
    }


def head_commit() -> str:
    """The checkout's commit, short; "unknown" outside a git checkout."""
    found = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return found.stdout.strip() or "unknown"


def finish(results: dict[str, Any], lines: list[str], *, name: str, smoke: bool) -> None:
    """A scenario's figures echoed; a full run's kept (`keep_results`), a smoke run's not:
    they are checks, not figures."""
    if not smoke:
        keep_results(results, name)
    echo_figures(results, lines)
    if smoke:
        click.echo("smoke run: every scenario ran and was checked; its figures are not kept")


def echo_figures(results: dict[str, Any] | None, lines: list[str], indent: str = "") -> None:
    """The figures as JSON (when given), then their summary lines."""
    if results is not None:
        click.echo(json.dumps(results, indent=2))
    for line in lines:
        click.echo(f"{indent}{line}")
