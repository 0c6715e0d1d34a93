"""Metrics never cost an event: a web process whose metrics directory is gone still
stores and answers deliveries, and a worker that serves no metrics port still counts
its work horses into one set of files in a directory it is given."""

from __future__ import annotations

import shutil

import pytest
import requests

from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_for
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
    procs, proc_settings, runtime, tmp_path
):
    directory = tmp_path / "metrics"
    directory.mkdir()
    base, _, web = start_procfile_web(
        procs, proc_settings, WEB_CONCURRENCY="1", PROMETHEUS_MULTIPROC_DIR=str(directory)
    )
    shutil.rmtree(directory)  # a new series now has no file to go to
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    answers = [post(base, endpoint, f"evt_uncounted_{n}") for n in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200], web.log()[-3000:]
    assert count(runtime, "SELECT count(*) FROM events") == 3
    assert web.log().count("metrics: counting failed") == 1, web.log()[-3000:]


@pytest.mark.slow
def test_work_horses_share_one_set_of_files_when_the_worker_serves_no_port(
    procs, proc_settings, runtime, client, tmp_path
):
    jobs = 8
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = process_env(proc_settings, HOOKLATCH_JOB_SIZE="1")
    worker = procs(
        "worker", hooklatch_cmd("worker"), {**env, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    )
    procs("relay", hooklatch_cmd("relay"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(jobs):
        body = stripe_event(f"evt_portless_{n}", event_type="effect.horse")
        response = client.post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
        )
        assert response.status_code == 200
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == jobs,
        timeout=60,
        message=f"{jobs} events processed",
    )
    assert worker.log().count("batch done") >= jobs  # one job, one work horse, per event
    files = sorted(path.name for path in directory.iterdir())
    assert len(files) <= 4, files  # the horses' shared set, not one set per job
