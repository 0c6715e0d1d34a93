"""Every window between the relay's push and a committed outcome: a process killed (or Redis
restarted) there loses no event, and the event runs once, within the stated bound.

The bound (docs/architecture.md, "Lost dispatches"): an accepted event is processed within
the dispatch grace + two sweep intervals + its processing time after the last fault.
"""

from __future__ import annotations

import re
import signal
import sys
import time
from datetime import datetime

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from hooklatch.jobs import SERIALIZER
from tests.support.database import count
from tests.support.effects import effects
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import (
    free_port,
    hooklatch_cmd,
    listening,
    process_env,
    start_redis,
    with_port,
)
from tests.support.relay import jobs_of

SECRET = "whsec_test_secret"
EVENTS = 5
# The relay's own timing on a loaded two-core machine: a sweep comes due between two
# polls, and its queries take some milliseconds.
SLACK = 1.0
# After the rows are handed out again: a new worker's start (a Python process importing
# everything) and the handlers themselves.
STARTUP_AND_PROCESSING = 15.0


def bound(settings) -> float:
    """docs/architecture.md, "The bound": from the fault until the stranded rows are pushed
    to a new job."""
    return (
        settings.dispatch_grace_seconds
        + 2 * settings.sweep_interval_seconds
        + settings.relay_poll_seconds
    )


def effects_by_event(runtime) -> dict[str, int]:
    with runtime.engine.connect() as c:
        rows = c.execute(effects.select()).all()
    seen: dict[str, int] = {}
    for row in rows:
        seen[row.external_id] = seen.get(row.external_id, 0) + 1
    return seen


def deliver_all(client, runtime, prefix: str) -> list[str]:
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    names = [f"evt_{prefix}_{i}" for i in range(EVENTS)]
    for name in names:
        deliver(client, endpoint, name, "effect.lost")
    return names


def handed_out(runtime) -> bool:
    return count(runtime, "SELECT count(*) FROM outbox WHERE job_id IS NULL") == 0


def start_worker(procs, env, name="worker"):
    """A healthy `hooklatch worker`; returns when it listens on the queue."""
    worker = procs(name, hooklatch_cmd("worker"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    return worker


def held_by(runtime, job_ids) -> int:
    return count(runtime, "SELECT count(*) FROM outbox WHERE job_id = ANY(:j)", j=list(job_ids))


def taken(runtime, queue) -> list[str]:
    """The jobs of the outbox's rows that are in their queue's list no more: a worker took
    them. `hooklatch worker` reads two queues, so RQ pops a job (BLPOP) rather than moving
    it to its intermediate list (BLMOVE, which takes one queue): a taken job is in no list."""
    return [j for j in sorted(jobs_of(runtime)) if queue.connection.lpos(queue.key, j) is None]


RETRY = re.compile(r"^(\S+ \S+) ERROR .*relay pass failed .*retrying in ([\d.]+) s$", re.M)


def relay_back(log: str, since: float) -> float:
    """When the relay's next pass came after the last one that failed (Redis away), on
    this test's monotonic clock; `since` if none failed. The bound counts from there."""
    failures = RETRY.findall(log)
    if not failures:
        return since
    stamp, delay = failures[-1]
    wall = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp() + float(delay)
    return max(since, time.monotonic() - (time.time() - wall))


def assert_handed_out_again(runtime, settings, *, stuck, since, what: str) -> None:
    """The rows of the stuck jobs go out to new jobs within the bound (no worker is
    needed for that). ``since``: the fault's time, or a function that tells it after."""
    limit = bound(settings) + SLACK
    freed = wait_for(
        lambda: held_by(runtime, stuck) == 0,
        timeout=limit + 30,
        interval=0.05,
        message=f"the rows of the jobs stranded by {what} handed out again",
    )
    since = since() if callable(since) else since
    print(f"{what}: rows handed out again {freed - since:.2f} s after the fault (bound {limit} s)")
    assert freed - since <= limit


def assert_each_ran_once(runtime, names, settings, *, what: str) -> None:
    wait_for(
        lambda: (
            count(runtime, "SELECT count(*) FROM events WHERE status = 'processed'") == len(names)
        ),
        timeout=STARTUP_AND_PROCESSING,
        message=f"every event processed after {what}",
    )
    time.sleep(2 * settings.sweep_interval_seconds)  # a second dispatch would run by now
    assert effects_by_event(runtime) == dict.fromkeys(names, 1)
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


@pytest.mark.slow
def test_jobs_moved_to_the_intermediate_list_as_a_dying_worker_leaves_them_run_once(
    client, runtime, proc_settings, procs
):
    """The report's reproduction: the jobs are moved the way an RQ 3 worker on one queue
    dequeues them (LMOVE to the intermediate list, status still queued; a worker of the
    version before replays had a queue of their own), and that worker is gone."""
    env = process_env(proc_settings)
    procs("relay", hooklatch_cmd("relay"), env)
    names = deliver_all(client, runtime, "lmove")
    wait_for(lambda: handed_out(runtime), timeout=20, message="outbox rows handed to jobs")

    redis = Redis.from_url(proc_settings.redis_url)
    queue = Queue(proc_settings.queue_name, connection=redis, serializer=SERIALIZER)
    while redis.lmove(queue.key, queue.intermediate_queue_key) is not None:
        pass
    faulted = time.monotonic()
    stuck = queue.intermediate_queue.get_job_ids()
    assert stuck
    for job_id in stuck:
        assert Job.fetch(job_id, connection=redis).get_status() == JobStatus.QUEUED

    assert held_by(runtime, stuck) == EVENTS
    what = "jobs left dequeued"
    assert_handed_out_again(runtime, proc_settings, stuck=stuck, since=faulted, what=what)
    start_worker(procs, env)
    assert_each_ran_once(runtime, names, proc_settings, what=what)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_dequeue", "before_started", "after_started"])
def test_a_worker_killed_between_dequeue_and_lease_strands_nothing(
    client, runtime, proc_settings, procs, point
):
    env = process_env(proc_settings)
    dying = procs(
        f"dying-worker-{point}",
        [sys.executable, "-m", "tests.support.dying_worker"],
        {**env, "HOOKLATCH_TEST_DIE_AT": point},
    )
    wait_for(lambda: listening(dying), timeout=30, message="dying worker listening")
    # Stored before the relay starts: one job takes them all, and the worker dies with it
    # at once (delivered while the relay runs, the sweep could hand the first job's rows
    # out again before the checks below, if delivering the rest took long enough).
    names = deliver_all(client, runtime, point)
    procs("relay", hooklatch_cmd("relay"), env)

    assert dying.popen.wait(timeout=30) == -signal.SIGKILL, dying.log()
    faulted = time.monotonic()
    redis = Redis.from_url(proc_settings.redis_url)
    queue = Queue(proc_settings.queue_name, connection=redis, serializer=SERIALIZER)
    [job_id] = taken(runtime, queue)
    expected = JobStatus.STARTED if point == "after_started" else JobStatus.QUEUED
    assert Job.fetch(job_id, connection=queue.connection).get_status() == expected

    assert held_by(runtime, [job_id]) > 0
    what = f"a kill {point}"
    assert_handed_out_again(runtime, proc_settings, stuck=[job_id], since=faulted, what=what)
    start_worker(procs, env)
    assert_each_ran_once(runtime, names, proc_settings, what=what)


@pytest.mark.slow
@pytest.mark.parametrize("persistence", ["aof", "none"])
def test_redis_restarted_while_a_job_is_taken_and_not_started_strands_nothing(
    client, runtime, proc_settings, procs, tmp_path, persistence
):
    port = free_port()
    redis_args = ["--appendonly", "yes", "--appendfsync", "always"] if persistence == "aof" else []
    start_redis(procs, port, tmp_path, *redis_args)
    env = process_env(proc_settings, REDIS_URL=with_port(proc_settings.redis_url, port))
    dying = procs(
        "dying-worker",
        [sys.executable, "-m", "tests.support.dying_worker"],
        {**env, "HOOKLATCH_TEST_DIE_AT": "after_dequeue"},
    )
    wait_for(lambda: listening(dying), timeout=30, message="dying worker listening")
    relay = procs("relay", hooklatch_cmd("relay"), env)
    names = deliver_all(client, runtime, f"restart_{persistence}")
    assert dying.popen.wait(timeout=30) == -signal.SIGKILL, dying.log()
    wait_for(lambda: handed_out(runtime), timeout=20, message="outbox rows handed to jobs")

    redis = Redis(host="127.0.0.1", port=port)
    queue = Queue(proc_settings.queue_name, connection=redis, serializer=SERIALIZER)
    stuck = taken(runtime, queue)
    assert len(stuck) == 1
    assert held_by(runtime, stuck) > 0  # the rows still point at the job the worker took
    redis.shutdown(nosave=persistence == "none")
    start_redis(procs, port, tmp_path, *redis_args)
    faulted = time.monotonic()
    assert redis.exists(Job.key_for(stuck[0])) == (1 if persistence == "aof" else 0)

    what = f"a Redis restart ({persistence})"
    # The relay retries a failed pass after 1, 2, 4... s: the bound counts from its return.
    since = lambda: relay_back(relay.log(), faulted)  # noqa: E731
    assert_handed_out_again(runtime, proc_settings, stuck=stuck, since=since, what=what)
    start_worker(procs, env)
    assert_each_ran_once(runtime, names, proc_settings, what=what)
    assert relay.popen.poll() is None, relay.log()
