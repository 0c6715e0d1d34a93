"""Processes killed at the worst moment lose nothing and do nothing twice."""

import os
import signal
import sys
import time

import pytest
from redis import Redis
from rq import Queue

from hooklatch.jobs import SERIALIZER
from tests.support.database import count, load_event
from tests.support.effects import effect_rows
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import hooklatch_cmd, process_env

SECRET = "whsec_test_secret"
RECOVERY_BOUND_SECONDS = 30


def hanging(client, runtime, settings, procs, tmp_path, worker_name, external_id):
    """A relay and a worker running, and an event whose handler writes its effect and then
    hangs in its first run: the environment, endpoint, worker, the event's stored id, and
    its work horse's process id once the handler has started."""
    markers = tmp_path / "markers"
    markers.mkdir()
    env = process_env(settings, HOOKLATCH_TEST_MARKERS=str(markers))
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    procs("relay", hooklatch_cmd("relay"), env)
    worker = procs(worker_name, hooklatch_cmd("worker"), env)
    event_id = deliver(client, endpoint, external_id, "hang.kill")
    marker = markers / external_id
    wait_for(marker.exists, timeout=30, message="handler started")
    return env, endpoint, worker, event_id, int(marker.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("victim", ["whole_worker", "work_horse"])
def test_worker_killed_inside_a_handler_leaves_no_effect_and_another_worker_finishes_once(
    client, runtime, proc_settings, procs, tmp_path, victim
):
    env, _, first, event_id, horse = hanging(
        client, runtime, proc_settings, procs, tmp_path, "worker-a", f"evt_kill_{victim}"
    )
    # The handler has written its effect through ctx.session and is now stuck before commit.
    assert len(effect_rows(runtime, f"evt_kill_{victim}")) == 0

    if victim == "whole_worker":
        # As when the container or host dies: the worker and its work horse (RQ puts the horse
        # in a process group of its own), with no chance to clean up.
        first.kill(signal.SIGKILL)
    os.kill(horse, signal.SIGKILL)
    killed_at = time.monotonic()
    assert len(effect_rows(runtime, f"evt_kill_{victim}")) == 0
    assert load_event(runtime, event_id).status == "pending"

    procs("worker-b", hooklatch_cmd("worker"), env)
    done_at = wait_for(
        lambda: load_event(runtime, event_id).status == "processed",
        timeout=RECOVERY_BOUND_SECONDS,
        message="processed by another worker",
    )
    print(f"recovered {done_at - killed_at:.2f} s after SIGKILL ({victim})")
    assert len(effect_rows(runtime, f"evt_kill_{victim}")) == 1
    time.sleep(1.5)  # any further dispatch would have run by now
    assert len(effect_rows(runtime, f"evt_kill_{victim}")) == 1


@pytest.mark.slow
def test_relay_killed_after_pushing_to_redis_before_commit_still_runs_the_handler_once(
    client, runtime, proc_settings, procs
):
    env = process_env(proc_settings)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_relay_crash", "effect.relay")

    crashed = procs("crashing-relay", [sys.executable, "-m", "tests.support.crashing_relay"], env)
    assert crashed.popen.wait(timeout=30) == -signal.SIGKILL, crashed.log()
    # The job reached Redis, but the transaction that would remove the outbox row died.
    redis = Redis.from_url(proc_settings.redis_url)
    queue = Queue(proc_settings.queue_name, connection=redis, serializer=SERIALIZER)
    assert queue.count == 1
    assert count(runtime, "SELECT count(*) FROM outbox") == 1

    procs("relay", hooklatch_cmd("relay"), env)
    procs("worker", hooklatch_cmd("worker"), env)
    wait_for(
        lambda: load_event(runtime, event_id).status == "processed", timeout=30, message="processed"
    )
    wait_for(
        lambda: queue.count == 0 and count(runtime, "SELECT count(*) FROM outbox") == 0,
        timeout=30,
        message="both jobs consumed",
    )
    time.sleep(1.0)
    assert len(effect_rows(runtime, "evt_relay_crash")) == 1


@pytest.mark.slow
def test_relay_stopped_after_pushing_to_redis_before_commit_commits_then_exits(
    client, runtime, proc_settings, procs
):
    """SIGTERM where the SIGKILL above lands: the pass under way commits, then the relay
    exits; the event runs once."""
    env = process_env(proc_settings)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_relay_term", "effect.relay")

    stopped = procs(
        "stopped-relay", [sys.executable, "-m", "tests.support.crashing_relay", "term"], env
    )
    assert stopped.popen.wait(timeout=30) == 0, stopped.log()
    with runtime.engine.connect() as connection:
        job_ids = connection.exec_driver_sql("SELECT job_id FROM outbox").scalars().all()
    assert len(job_ids) == 1 and job_ids[0] is not None  # handed to the job it pushed

    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(
        lambda: load_event(runtime, event_id).status == "processed",
        timeout=30,
        message="processed",
        explain=worker.log,
    )
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    assert len(effect_rows(runtime, "evt_relay_term")) == 1


@pytest.mark.slow
def test_hooklatch_relay_given_sigterm_between_push_and_commit_commits_then_exits(
    client, runtime, proc_settings, procs
):
    """The same moment in the real `hooklatch relay`: a table lock that lets the relay
    claim the row and push its job but holds the statement that marks the row, so the
    SIGTERM lands while the pass's transaction is open, its job already in Redis."""
    env = process_env(proc_settings)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_relay_term_real", "effect.relay")
    queue = Queue(
        proc_settings.queue_name,
        connection=Redis.from_url(proc_settings.redis_url),
        serializer=SERIALIZER,
    )

    with runtime.engine.connect() as holder:
        # SHARE admits the relay's SELECT ... FOR UPDATE, not its UPDATE of the row.
        holder.exec_driver_sql("LOCK TABLE outbox IN SHARE MODE")
        relay = procs("relay", hooklatch_cmd("relay"), env)
        wait_for(lambda: queue.count == 1, timeout=30, message="the relay's job pushed")
        wait_for(
            lambda: (
                count(
                    runtime,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query LIKE 'UPDATE outbox%'",
                )
                == 1
            ),
            timeout=10,
            message="the relay waiting to mark the row",
        )
        relay.popen.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert relay.popen.poll() is None, "the relay left its pass before it committed"
        holder.rollback()
    assert relay.popen.wait(timeout=30) == 0, relay.log()
    with runtime.engine.connect() as connection:
        job_ids = connection.exec_driver_sql("SELECT job_id FROM outbox").scalars().all()
    assert job_ids == [queue.job_ids[0]]  # the pass committed: the row names the job pushed

    procs("worker", hooklatch_cmd("worker"), env)
    wait_for(
        lambda: load_event(runtime, event_id).status == "processed", timeout=30, message="processed"
    )
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    assert len(effect_rows(runtime, "evt_relay_term_real")) == 1


@pytest.mark.slow
def test_a_handler_that_kills_its_process_ends_dead_and_its_batch_mates_run_once(
    client, runtime, proc_settings, procs
):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [
        deliver(client, endpoint, "evt_mate_a", "effect.mate"),
        deliver(client, endpoint, "evt_poison", "die.poison"),
        deliver(client, endpoint, "evt_mate_b", "effect.mate"),
    ]
    env = process_env(proc_settings, HOOKLATCH_MAX_LOST_DISPATCHES="2")
    procs("worker", hooklatch_cmd("worker"), env)
    procs("relay", hooklatch_cmd("relay"), env)  # after the three: one job for all of them

    wait_for(
        lambda: [load_event(runtime, i).status for i in ids] == ["processed", "dead", "processed"],
        timeout=60,
        message="mates processed and the poison dead",
    )
    assert len(effect_rows(runtime, "evt_mate_a")) == 1
    assert len(effect_rows(runtime, "evt_mate_b")) == 1
    assert len(effect_rows(runtime, "evt_poison")) == 0
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


@pytest.mark.slow
def test_a_killed_work_horse_is_replaced_and_its_worker_finishes_the_event_once(
    client, runtime, proc_settings, procs, tmp_path
):
    """The worker outlives its horse: it forks another, which takes the next job at once
    and, after the sweep, the killed one's event."""
    _, endpoint, worker, event_id, horse = hanging(
        client, runtime, proc_settings, procs, tmp_path, "worker", "evt_horse_killed"
    )
    assert horse != worker.popen.pid

    os.kill(horse, signal.SIGKILL)
    wait_for(
        lambda: "the work horse died (killed by SIGKILL), another starts in" in worker.log(),
        timeout=10,
        message="the worker noticing its horse died",
    )
    assert worker.popen.poll() is None
    later = deliver(client, endpoint, "evt_after_the_horse", "effect.kill")
    wait_for(
        lambda: load_event(runtime, later).status == "processed",
        timeout=15,
        message="the next event processed by the new horse",
    )
    wait_for(
        lambda: load_event(runtime, event_id).status == "processed",
        timeout=RECOVERY_BOUND_SECONDS,
        message="the killed horse's event processed by its successor",
    )
    assert len(effect_rows(runtime, "evt_horse_killed")) == 1
    assert len(effect_rows(runtime, "evt_after_the_horse")) == 1
    assert worker.log().count("worker listening on queue") == 1  # its successor said nothing


@pytest.mark.slow
def test_a_work_horse_is_replaced_after_its_share_of_jobs(client, runtime, proc_settings, procs):
    env = process_env(proc_settings, HOOKLATCH_WORKER_MAX_JOBS="2", HOOKLATCH_JOB_SIZE="1")
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [deliver(client, endpoint, f"evt_share_{n}", "effect.share") for n in range(5)]
    worker = procs("worker", hooklatch_cmd("worker"), env)
    procs("relay", hooklatch_cmd("relay"), env)
    wait_for(
        lambda: all(load_event(runtime, i).status == "processed" for i in ids),
        timeout=30,
        message="five jobs processed",
    )
    assert worker.log().count("work horse replaced after 2 jobs") == 2, worker.log()
    for n in range(5):
        assert len(effect_rows(runtime, f"evt_share_{n}")) == 1
    worker.stops_on_sigterm()


def enqueue_batch(settings, event_ids, *, timeout):
    """A job as the relay makes it, with a timeout of the test's choosing."""
    queue = Queue(
        settings.queue_name, connection=Redis.from_url(settings.redis_url), serializer=SERIALIZER
    )
    return queue.enqueue(
        "hooklatch.workers.worker.jobs.process_batch", event_ids, [], job_timeout=timeout
    )


def a_job_each(client, runtime, procs, settings, env, events):
    """Each of ``events`` (external id, type, its job's timeout) delivered, a worker started,
    and a job enqueued for each in turn: the worker and the events' ids."""
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [deliver(client, endpoint, name, kind) for name, kind, _ in events]
    worker = procs("worker", hooklatch_cmd("worker"), env)
    for event_id, (_, _, timeout) in zip(ids, events, strict=True):
        enqueue_batch(settings, [event_id], timeout=timeout)
    return worker, ids


@pytest.mark.slow
def test_a_work_horse_whose_job_overruns_its_timeout_is_replaced(
    client, runtime, proc_settings, procs, tmp_path
):
    """RQ's in-process worker raises its timeout in the job once; a handler that never
    sees it (blocked in C, or swallowing it) held the horse, and the worker, for ever."""
    markers = tmp_path / "markers"
    markers.mkdir()
    env = process_env(proc_settings, HOOKLATCH_TEST_MARKERS=str(markers))
    events = [("evt_stuck", "stuck.timeout", 2), ("evt_after_stuck", "effect.timeout", 60)]
    worker, (stuck, later) = a_job_each(client, runtime, procs, proc_settings, env, events)
    wait_for((markers / "evt_stuck").exists, timeout=30, message="the handler stuck")
    wait_for(
        lambda: load_event(runtime, later).status == "processed",
        timeout=30,
        message="the next job run by a new horse",
    )
    log = worker.log()
    assert "past its 2 s timeout: stopping its work horse" in log, log
    assert "the work horse died (killed by SIGKILL)" in log, log
    assert load_event(runtime, stuck).status == "pending"  # its chunk rolled back
    assert effect_rows(runtime, "evt_stuck") == []
    worker.stops_on_sigterm()


@pytest.mark.slow
def test_a_child_a_handler_left_behind_does_not_hold_the_worker(
    client, runtime, proc_settings, procs
):
    """The child keeps the horse's end of its report pipe open: the worker must not wait
    for that pipe's end to replace the horse."""
    env = process_env(proc_settings, HOOKLATCH_WORKER_MAX_JOBS="1")
    events = [("evt_forks", "forks.child", 60), ("evt_after_fork", "effect.child", 60)]
    worker, (forks, later) = a_job_each(client, runtime, procs, proc_settings, env, events)
    wait_for(
        lambda: load_event(runtime, later).status == "processed",
        timeout=30,
        message="the second job run by the next horse",
    )
    assert load_event(runtime, forks).status == "processed"
    assert worker.log().count("work horse replaced after 1 jobs") >= 1, worker.log()
    worker.stops_on_sigterm()
