"""`hooklatch worker` when Redis goes away: it waits and works again, and a SIGTERM still
stops it at once."""

import sys
from dataclasses import replace

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    retry_waits,
    start_redis,
    worker_runs_an_event,
)
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def deliver_effect(client, runtime, event_id):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event(event_id, event_type="effect.worker")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200


@pytest.mark.slow
def test_a_worker_started_while_redis_is_down_waits_for_it_then_works(
    procs, proc_settings, runtime, client, tmp_path
):
    """RQ's worker quits on a Redis error outside its wait for jobs (at start, in its
    maintenance): `hooklatch worker` starts it again instead of exiting."""
    port = free_port()
    settings = replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0")
    env = process_env(settings)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(
        lambda: worker.log().count("Redis unreachable") >= 2,
        timeout=20,
        message="the worker saying twice that Redis is unreachable",
    )
    assert worker.popen.poll() is None, worker.log()
    retry_waits(worker.log(), "Redis unreachable", 2)

    start_redis(procs, port, tmp_path)
    procs("relay", hooklatch_cmd("relay"), env)
    worker_runs_an_event(client, runtime, worker, "evt_worker_waited")

    worker.stops_on_sigterm()


@pytest.mark.slow
def test_a_worker_whose_rq_loop_quits_on_a_redis_blip_starts_again(
    procs, proc_settings, runtime, client, tmp_path
):
    """RQ logs a Redis error in its maintenance and returns from its loop, as if asked to
    stop; without a signal, hooklatch starts a new RQ worker."""
    env = process_env(proc_settings)
    worker = procs(
        "worker",
        [sys.executable, "-m", "tests.support.flaky_worker"],
        {**env, "HOOKLATCH_TEST_BLIPPED": str(tmp_path / "blipped")},
    )
    wait_for(
        lambda: "quit on its own" in worker.log(),
        timeout=20,
        message="the worker noticing RQ's loop ended",
    )
    procs("relay", hooklatch_cmd("relay"), env)
    deliver_effect(client, runtime, "evt_after_blip")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == 1,
        timeout=30,
        message=f"the event processed after the blip\n{worker.log()}",
    )
    worker.stops_on_sigterm(timeout=10)


@pytest.mark.slow
def test_sigterm_stops_a_worker_waiting_for_redis(procs, proc_settings, tmp_path):
    port = free_port()
    env = process_env(replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0"))
    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(lambda: "Redis unreachable" in worker.log(), timeout=20, message="waiting")
    worker.stops_on_sigterm(timeout=5)


@pytest.mark.slow
def test_sigterm_stops_a_worker_whose_redis_has_just_gone(procs, proc_settings, tmp_path):
    """RQ takes the signal, and its goodbye to Redis then fails: that is still a stop."""
    port = free_port()
    redis = start_redis(procs, port, tmp_path)
    env = process_env(replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0"))
    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(lambda: listening(worker), timeout=20, message="worker listening")
    redis.kill()
    worker.stops_on_sigterm(timeout=10)


@pytest.mark.parametrize("worker_class", ["ForkingHooklatchWorker", "SimpleHooklatchWorker"])
def test_a_stop_taken_while_redis_is_away_ends_the_retries(procs, tmp_path, worker_class):
    """RQ's signal handler raises StopRequested wherever the worker is. Raised inside the
    log call of one of RQ's reconnect retries, logging swallows it and RQ retries for
    ever: the worker's own retries must honour a stop already taken."""
    import threading
    from datetime import UTC, datetime

    from redis import Redis
    from rq.exceptions import StopRequested

    from hooklatch.workers.worker import rq_workers

    port = free_port()
    redis = start_redis(procs, port, tmp_path)
    worker = getattr(rq_workers, worker_class)(["q"], connection=Redis("127.0.0.1", port))
    outcome = []

    def dequeue():
        try:
            worker.dequeue_job_and_maintain_ttl(timeout=30)
        except StopRequested:
            outcome.append("stopped")

    thread = threading.Thread(target=dequeue, daemon=True)
    thread.start()
    watcher = Redis("127.0.0.1", port)
    wait_for(
        lambda: any(c["cmd"] == "blmove" for c in watcher.client_list()),
        timeout=5,
        message="the worker waiting for a job",
    )
    redis.kill()  # RQ logs the lost connection and retries each second
    worker._shutdown_requested_date = datetime.now(UTC)  # as RQ's request_stop leaves it
    thread.join(timeout=8)
    assert outcome == ["stopped"]
