"""`python -m bench [--smoke]`: run every scenario; write the results, the tables and the plot."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
import psycopg2
import redis as redis_lib

from bench import report
from bench.procs import ROOT, BenchError, scalar, scratch_database
from bench.scenarios import Bench, Plan


def _machine(database_url: str, redis_url: str) -> dict[str, Any]:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as handle:
        for line in handle:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as handle:
        memory_kib = int(handle.readline().split()[1])
    wrk = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": str(scalar(database_url, "SHOW server_version")).split()[0],
        "redis": redis_lib.Redis.from_url(redis_url).info()["redis_version"],
        "wrk": (wrk.stdout or wrk.stderr).split("[")[0].strip() or "wrk",
    }


def _preflight(admin_url: str, redis_url: str) -> None:
    missing = [tool for tool in ("wrk", "pgbench") if shutil.which(tool) is None]
    if missing:
        raise click.ClickException(
            f"missing {', '.join(missing)}: apt-get install wrk postgresql-client"
        )
    try:
        psycopg2.connect(admin_url).close()
    except psycopg2.OperationalError as exc:
        raise click.ClickException(
            f"PostgreSQL does not answer at BENCH_PG_ADMIN_URL: {exc}"
        ) from exc
    try:
        redis_lib.Redis.from_url(redis_url).ping()
    except redis_lib.RedisError as exc:
        raise click.ClickException(f"Redis does not answer at BENCH_REDIS_URL: {exc}") from exc


def run(plan: Plan, admin_url: str, redis_url: str, work_dir: Path) -> dict[str, Any]:
    with scratch_database(admin_url) as database_url:
        bench = Bench(
            plan, database_url, redis_url, work_dir, web_workers=2 * (os.cpu_count() or 1)
        )
        bench.log(f"database {database_url.rsplit('/', 1)[-1]}, logs in {work_dir}")
        bench.prepare()
        scenarios: dict[str, Any] = {"ingest": {}, "drain": {}}
        bench.log("ingest")
        scenarios["ingest"]["hooklatch"] = bench.ingest(
            "hooklatch", bench.hooklatch(), bench.stored_hooklatch
        )
        scenarios["ingest"]["naive"] = bench.ingest("naive", bench.naive(), bench.stored_naive)
        scenarios["ingest"]["naive_no_enqueue"] = bench.ingest(
            "naive-no-enqueue", bench.naive(enqueue=False), bench.stored_naive
        )
        scenarios["ceiling"] = bench.ceiling()
        bench.log("drain")
        scenarios["drain"]["hooklatch_noop"] = bench.drain("bench.handlers.noop")
        scenarios["drain"]["hooklatch_write"] = bench.drain("bench.handlers.write")
        scenarios["drain"]["naive_simple_worker"] = bench.naive_drain(
            "rq.worker.SimpleWorker", plan.naive_simple_events
        )
        scenarios["drain"]["naive_worker"] = bench.naive_drain(
            "rq.worker.Worker", plan.naive_fork_events
        )
        bench.log("end to end")
        scenarios["end_to_end"] = bench.end_to_end()
        bench.log("lost-job sweep")
        scenarios["sweep"] = bench.sweep()
        return {
            "date": dt.date.today().isoformat(),
            "smoke": plan.smoke,
            "machine": _machine(database_url, redis_url),
            "plan": {key: value for key, value in vars(plan).items()},
            "web_workers": bench.web_workers,
            "scenarios": scenarios,
        }


@click.command()
@click.option(
    "--smoke", is_flag=True, help="Every scenario for a few seconds: checks, not figures."
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the JSON, Markdown and PNG go (default: bench/results and docs; "
    "with --smoke, a temporary folder).",
)
def main(smoke: bool, out: Path | None) -> None:
    admin_url = os.environ.get(
        "BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
    )
    # A Redis database of its own: the harness empties it between scenarios.
    redis_url = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")
    _preflight(admin_url, redis_url)
    plan = Plan.for_run(smoke)
    with tempfile.TemporaryDirectory(prefix="hooklatch-bench-") as scratch:
        work_dir = Path(scratch)
        try:
            results = run(plan, admin_url, redis_url, work_dir)
        except BenchError as exc:
            raise click.ClickException(str(exc)) from exc
        if out is None and smoke:
            out = work_dir / "out"
        results_dir = out or ROOT / "bench" / "results"
        docs_dir = out or ROOT / "docs"
        results_dir.mkdir(parents=True, exist_ok=True)
        docs_dir.mkdir(parents=True, exist_ok=True)
        json_path = results_dir / f"{results['date']}{'-smoke' if smoke else ''}.json"
        results["file"] = (
            str(json_path.relative_to(ROOT)) if json_path.is_relative_to(ROOT) else str(json_path)
        )
        results["targets"] = [t.as_json() for t in report.targets(results)]
        json_path.write_text(json.dumps(results, indent=2) + "\n")
        plot_path = docs_dir / "benchmarks.png"
        report.plot(results, plot_path)
        document = docs_dir / "benchmarks.md"
        report.update_document(document, report.markdown(results, plot_path.name))
        if smoke and out == work_dir / "out":
            click.echo("smoke run: every scenario ran and was checked; its figures are not kept")
        else:
            click.echo(f"wrote {json_path}, {document}, {plot_path}")
        for target in results["targets"]:
            state = "met" if target["met"] else "MISSED"
            click.echo(f"  {state:6} {target['target']}: {target['value']} {target['unit']}")


if __name__ == "__main__":
    sys.exit(main())
