"""SIGTERM to `hooklatch worker` in the middle of a job of many events: the chunk under
way finishes, the rest of the job goes back to the relay, the process exits, and in the
end every event runs once. RQ's own warm shutdown waited for the whole job."""

import os
import re
import signal
from dataclasses import replace

import pytest

from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    start_redis,
)

SECRET = "whsec_test_secret"
EVENTS = 40  # 0.2 s each: a job of all of them runs for 8 s


def effects_per_event(runtime) -> list[int]:
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT count(*) FROM test_effects GROUP BY external_id"
        ).all()
    return [row[0] for row in rows]


def the_one_job(runtime) -> str:
    with runtime.engine.connect() as connection:
        (job,) = connection.exec_driver_sql("SELECT DISTINCT job_id FROM outbox").scalars()
    return job


def assert_handed_out_again_uncounted(runtime, job: str, rows: int) -> None:
    """The job's ``rows`` outbox rows are in other jobs now, none counting a lost dispatch
    (three of those and an event is dead)."""
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM outbox WHERE job_id <> :j", j=job) == rows,
        timeout=30,
        message="the stopped job's rows handed out again",
    )
    assert count(runtime, "SELECT count(*) FROM outbox WHERE lost_dispatches > 0") == 0


def start_worker(procs, env, args, name="worker"):
    worker = procs(name, [*hooklatch_cmd("worker"), *args], env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    return worker


@pytest.mark.slow
@pytest.mark.parametrize("args", [[], ["--simple"]], ids=["work-horse", "simple"])
def test_sigterm_mid_job_ends_after_the_chunk_and_hands_the_rest_back(
    procs, proc_settings, runtime, client, args
):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for n in range(EVENTS):  # stored before the relay starts: one job takes them all
        deliver(client, endpoint, f"evt_stop_{n}", "slow.stop")
    env = process_env(proc_settings)
    worker = start_worker(procs, env, args)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") >= 3,
        timeout=30,
        message="the job under way",
        explain=lambda: f"{worker.log()}\n{relay.log()}",
    )
    job = the_one_job(runtime)
    worker.stops_on_sigterm(timeout=30)
    done = count(runtime, "SELECT count(*) FROM test_effects")
    assert 3 <= done < EVENTS, worker.log()  # it did not wait for the job's end
    handed = re.search(r"stopping: (\d+) outbox rows handed back", worker.log())
    assert handed and int(handed[1]) == EVENTS - done, worker.log()
    assert_handed_out_again_uncounted(runtime, job, EVENTS - done)

    start_worker(procs, env, args, name="next-worker")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM events WHERE status = 'processed'") == EVENTS,
        timeout=60,
        message="every event processed by the next worker",
    )
    assert effects_per_event(runtime) == [1] * EVENTS
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


def hang_a_worker(procs, settings, markers, external_id):
    """A worker (1 s stop grace) and a relay running, its horse stuck in the handler of
    ``external_id`` (delivered already, as a ``hang.stop`` event). Returns the worker and
    the environment both run with."""
    env = process_env(
        settings, HOOKLATCH_WORKER_STOP_SECONDS="1", HOOKLATCH_TEST_MARKERS=str(markers)
    )
    worker = start_worker(procs, env, [])
    relay = procs("relay", hooklatch_cmd("relay"), env)
    wait_for(
        lambda: (markers / external_id).exists(),
        timeout=30,
        message="the handler hangs",
        explain=lambda: f"{worker.log()}\n{relay.log()}",
    )
    return worker, env


@pytest.mark.slow
def test_a_chunk_still_running_after_the_stop_grace_is_cut_short_and_runs_again(
    procs, proc_settings, runtime, client, tmp_path
):
    markers = tmp_path / "markers"
    markers.mkdir()
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    deliver(client, endpoint, "evt_hangs", "hang.stop")  # hangs the first time it runs
    for n in range(5):  # in the same chunk, after it: never started
        deliver(client, endpoint, f"evt_after_{n}", "effect.stop")
    worker, env = hang_a_worker(procs, proc_settings, markers, "evt_hangs")
    job = the_one_job(runtime)
    worker.stops_on_sigterm()
    assert "stopping its work horse now" in worker.log()
    assert count(runtime, "SELECT count(*) FROM test_effects") == 0  # its chunk rolled back
    assert_handed_out_again_uncounted(runtime, job, 6)

    start_worker(procs, env, [], name="next-worker")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM events WHERE status = 'processed'") == 6,
        timeout=60,
        message="the events processed by the next worker",
    )
    assert effects_per_event(runtime) == [1] * 6


@pytest.mark.slow
def test_a_stop_stays_bounded_when_redis_stops_answering(
    procs, proc_settings, runtime, client, tmp_path
):
    """The horse is killed first; recording its job as stopped waits a second at most, so
    a Redis that stopped answering (stopped with the rest of the stack) cannot hold the
    worker past its grace."""
    markers = tmp_path / "markers"
    markers.mkdir()
    port = free_port()
    redis = start_redis(procs, port, tmp_path)
    settings = replace(proc_settings, redis_url=f"redis://127.0.0.1:{port}/0")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    deliver(client, endpoint, "evt_hangs_frozen", "hang.stop")
    worker, _ = hang_a_worker(procs, settings, markers, "evt_hangs_frozen")
    os.kill(redis.popen.pid, signal.SIGSTOP)  # connections open, nothing answered
    try:
        worker.popen.send_signal(signal.SIGTERM)
        # Its 1 s grace and 1 s for Redis: 2.2 s here, and 6.2 s when the job was recorded
        # before the kill on the worker's own connection (5 s of socket timeout).
        assert worker.popen.wait(timeout=5) == 0, worker.log()
    finally:
        os.kill(redis.popen.pid, signal.SIGCONT)
    assert "stopping its work horse now" in worker.log()
    assert "not recorded as stopped" in worker.log()
    assert count(runtime, "SELECT count(*) FROM test_effects") == 0  # its chunk rolled back
