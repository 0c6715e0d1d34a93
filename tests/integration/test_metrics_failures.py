"""Metrics never cost an event and never say more than they know: a web process whose
metrics directory is gone still stores and answers deliveries; a worker that serves no
metrics port still counts its work horses into one set of files in a directory it is
given; the database gauges report down while their read is stuck."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest
import requests
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from hooklatch.assembly import build_runtime
from hooklatch.metrics import collectors
from hooklatch.operations.backlog import BacklogCollector
from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import hooklatch_cmd, listening, process_env, start_procfile_web
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def post(base: str, endpoint: str, external_id: str) -> requests.Response:
    body = stripe_event(external_id, event_type="effect.metrics")
    return requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET), timeout=10
    )


@pytest.mark.slow
def test_deliveries_are_stored_and_answered_when_their_metrics_cannot_be_written(
    procs, proc_settings, runtime, metrics_dir
):
    base, _, web = start_procfile_web(
        procs, proc_settings, WEB_CONCURRENCY="1", PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)
    )
    shutil.rmtree(metrics_dir)  # a new series now has no file to go to
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    answers = [post(base, endpoint, f"evt_uncounted_{n}") for n in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200], web.log()[-3000:]
    assert count(runtime, "SELECT count(*) FROM events") == 3
    assert web.log().count("metrics: counting failed") == 1, web.log()[-3000:]


@pytest.mark.slow
def test_work_horses_share_one_set_of_files_when_the_worker_serves_no_port(
    procs, proc_settings, runtime, client, metrics_dir
):
    jobs = 8
    env = process_env(proc_settings, HOOKLATCH_JOB_SIZE="1")
    worker = procs(
        "worker", hooklatch_cmd("worker"), {**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    )
    procs("relay", hooklatch_cmd("relay"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(jobs):
        deliver(client, endpoint, f"evt_portless_{n}", "effect.horse")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == jobs,
        timeout=60,
        message=f"{jobs} events processed",
    )
    # A job per event; each logs its end after its commit.
    wait_for(lambda: worker.log().count("batch done") >= jobs, timeout=30, message="every job done")
    files = sorted(path.name for path in metrics_dir.iterdir())
    assert len(files) <= 4, files  # the horses' shared set, not one set per job


def test_database_gauges_go_down_while_a_read_waits_on_a_database_that_stopped_answering(
    settings, runtime
):
    """A read blocked for good (here: on a lock; in production, a server that stopped
    answering without refusing connections) must not leave the gauges reporting up."""
    quick = build_runtime(replace(settings, metrics_cache_seconds=0.1))
    registry = collectors(BacklogCollector(quick))

    def up() -> float | None:
        """hooklatch_backlog_up, or None if the scrape left it out."""
        families = text_string_to_metric_families(generate_latest(registry).decode())
        found = [s.value for f in families for s in f.samples if s.name == "hooklatch_backlog_up"]
        return found[0] if found else None

    blocker = runtime.engine.connect()
    try:
        wait_for(lambda: up() == 1, timeout=10, message="the gauges read")
        with blocker.begin():
            blocker.execute(text("LOCK TABLE heartbeats IN ACCESS EXCLUSIVE MODE"))
            wait_for(lambda: up() == 0, timeout=10, message="the gauges down while stalled")
        wait_for(lambda: up() == 1, timeout=10, message="the gauges up again")
    finally:
        blocker.close()
        quick.dispose()


@pytest.mark.slow
def test_a_worker_whose_metrics_cannot_be_written_commits_each_chunk_once(
    procs, proc_settings, runtime, client, metrics_dir
):
    """Counted after the commit: a failure to count did make a committed chunk look
    failed, run again one event per transaction, and fail a job of one event."""
    env = process_env(proc_settings)
    worker = procs(
        "worker", hooklatch_cmd("worker"), {**env, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}
    )
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    shutil.rmtree(metrics_dir)  # a new series now has no file to go to
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(3):
        deliver(client, endpoint, f"evt_chunk_{n}", "effect.metrics")
    procs("relay", hooklatch_cmd("relay"), env)  # after the three: one job, one chunk
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == 3,
        timeout=60,
        message="3 events processed",
    )
    wait_for(lambda: "batch done" in worker.log(), timeout=10, message="the job done")
    log = worker.log()
    assert "one at a time" not in log, log
    assert "metrics: counting failed" in log, log
    assert count(runtime, "SELECT count(*) FROM attempts") == 3


@pytest.mark.slow
def test_a_relay_whose_metrics_cannot_be_written_keeps_cleaning_up(
    procs, proc_settings, runtime, client, tmp_path
):
    # A directory that is not there: every count fails, from the first. (Removed once the
    # relay runs, the files it had opened already would still take its counts: whether
    # it failed then depended on what it had counted before.)
    directory = tmp_path / "metrics-removed"
    env = process_env(
        proc_settings,
        HOOKLATCH_DEDUPE_RETENTION_DAYS=str(1 / 86400),
        HOOKLATCH_UNSAFE_SHORT_RETENTION="true",
        HOOKLATCH_CLEANUP_INTERVAL_SECONDS="0.2",
    )
    relay = procs(
        "relay", hooklatch_cmd("relay"), {**env, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    )
    procs("worker", [*hooklatch_cmd("worker"), "--simple"], env)
    wait_for(lambda: "relay started" in relay.log(), timeout=30, message="relay started")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(2):  # the second after the first pass that failed to count
        deliver(client, endpoint, f"evt_cleaned_{n}", "effect.metrics")
        wait_for(
            lambda: count(runtime, "SELECT count(*) FROM events") == 0,
            timeout=30,
            message=f"event {n} deleted by the relay's cleanup\n{relay.log()}",
        )
    assert relay.log().count("metrics: counting failed") == 1, relay.log()
