"""Metrics across real processes: gunicorn's workers add up, and a recycled one's counts
stay; a worker's work horses count into one bounded set of files, whatever the jobs; relays
and workers serve theirs on ports of their own; promtool accepts the output."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import requests

from tests.support.metrics import TOKEN_HEADER, run_promtool, sample, scrape
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    start_procfile_web,
    wait_http,
)
from tests.support.series import exported
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def post(base: str, endpoint: str, external_id: str, secret: str = SECRET) -> requests.Response:
    body = stripe_event(external_id, event_type="effect.metrics")
    return requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret), timeout=20
    )


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.slow
@pytest.mark.parametrize("given", [True, False], ids=["given-directory", "made-directory"])
def test_gunicorn_workers_counts_add_up_survive_a_recycled_worker_and_pass_promtool(
    procs, proc_settings, runtime, tmp_path, given
):
    """Unless PROMETHEUS_MULTIPROC_DIR is given (and emptied at start), gunicorn.conf.py
    makes one."""
    extra = {"WEB_CONCURRENCY": "1"}
    stale = tmp_path / "metrics" / "counter_999999.db"
    if given:
        stale.parent.mkdir()
        stale.write_bytes(b"left by an earlier run")
        extra["PROMETHEUS_MULTIPROC_DIR"] = str(stale.parent)
    base, _, web = start_procfile_web(procs, proc_settings, **extra)
    assert not stale.exists()
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(5):
        assert post(base, endpoint, f"evt_first_{n}").status_code == 200

    (worker,) = children(web.popen.pid)
    os.kill(worker, signal.SIGKILL)
    wait_for(
        lambda: children(web.popen.pid) not in ([], [worker]),
        timeout=20,
        message="a new gunicorn worker",
    )
    wait_http(base + "/livez", web)
    for n in range(5):
        assert post(base, endpoint, f"evt_second_{n}").status_code == 200
    assert post(base, endpoint, "evt_second_0").json()["status"] == "duplicate"
    assert post(base, endpoint, "evt_refused", secret="whsec_wrong").status_code == 401
    assert requests.post(f"{base}/hooks/ep_nobody", data=b"{}", timeout=10).status_code == 404

    url = base + "/metrics"
    assert requests.get(url, timeout=10).status_code == 401
    wait_for(
        lambda: exported(scrape(url, TOKEN_HEADER), "hooklatch_backlog_up") == 1,
        timeout=20,
        message="the database gauges read",
    )
    text = scrape(url, TOKEN_HEADER)
    deliveries = "hooklatch_deliveries_total"
    # Both workers' counts, the killed one's included.
    assert exported(text, deliveries, endpoint=endpoint, outcome="accepted") == 10
    assert exported(text, deliveries, endpoint=endpoint, outcome="duplicate") == 1
    assert exported(text, deliveries, endpoint=endpoint, outcome="bad_signature") == 1
    assert exported(text, deliveries, endpoint="unknown", outcome="unknown_endpoint") == 1
    assert exported(text, "hooklatch_events_pending") == 10

    checked = run_promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_work_horses_count_into_a_bounded_set_of_files_served_by_the_worker(
    procs, proc_settings, runtime, client, metrics_dir
):
    jobs = 12
    worker_port, relay_port = free_port(), free_port()
    env = process_env(proc_settings, HOOKLATCH_JOB_SIZE="1")
    worker = procs(
        "worker",
        hooklatch_cmd("worker"),
        {
            **env,
            "HOOKLATCH_WORKER_METRICS_PORT": str(worker_port),
            "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir),
        },
    )
    relay = procs(
        "relay", hooklatch_cmd("relay"), {**env, "HOOKLATCH_RELAY_METRICS_PORT": str(relay_port)}
    )
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(jobs):
        deliver(client, endpoint, f"evt_horse_{n}", "effect.horse")

    worker_url = f"http://127.0.0.1:{worker_port}/metrics"
    processed = "hooklatch_events_handled_total"
    # The counter is absent until the worker counts its first event: 0 until then.
    wait_for(
        lambda: (
            sample(scrape(worker_url), processed, provider="stripe", outcome="processed") == jobs
        ),
        timeout=60,
        message=f"{jobs} events counted by the worker",
    )
    assert worker.log().count("batch done") >= jobs  # a job per event
    files = sorted(path.name for path in metrics_dir.iterdir())
    # The worker's own files and its horses' shared ones: not one set per job.
    assert len(files) <= 4, files
    text = scrape(worker_url)
    assert exported(text, "hooklatch_handler_duration_seconds_count", provider="stripe") == jobs
    assert exported(text, "hooklatch_event_start_lag_seconds_count", attempt="first") == jobs

    relay_url = f"http://127.0.0.1:{relay_port}/metrics"
    wait_for(
        lambda: exported(scrape(relay_url), "hooklatch_backlog_up") == 1,
        timeout=20,
        message="the relay's database gauges read",
    )
    assert exported(scrape(relay_url), "hooklatch_outbox_waiting_rows") == 0
    assert relay.popen.poll() is None
    for output in (text, scrape(relay_url)):
        checked = run_promtool("check", "metrics", stdin=output)
        assert checked.returncode == 0, checked.stdout + checked.stderr
