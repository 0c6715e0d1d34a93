"""The sweep tells lost work from work that is only waiting or running: taken off the
queue and never started, started without a lease, missing from Redis, and how it pages."""

from rq.job import Job, JobStatus

from hooklatch.workers.lease import job_lease
from hooklatch.workers.relay.sinks import SUSPECT_PREFIX
from tests.support.database import count
from tests.support.relay import WAITING, clocked, ingest, jobs_of, one_job, relay_for, second_sweep

SECRET = "whsec_test_secret"


def test_a_job_taken_off_the_queue_but_never_started_is_lost_a_sweep_after_it_is_seen(
    client, runtime
):
    """A worker killed between taking a job (RQ moves it to its intermediate list) and
    starting it leaves the job "queued" in no queue. A live worker starts it within
    milliseconds, so the sweep acts only when it is still so half a sweep interval after
    a sweep first saw it."""
    clock = clocked(runtime, dispatch_grace_seconds=10, sweep_interval_seconds=5)
    relay, queue, job_id = one_job(client, runtime, 4)
    clock.advance(11)
    assert relay.sweep_once() == 0  # queued, in the queue's list: a healthy backlog

    queue.connection.lmove(queue.key, queue.intermediate_queue_key)  # as RQ's dequeue
    assert Job.fetch(job_id, connection=queue.connection).get_status() == JobStatus.QUEUED
    assert relay.sweep_once() == 0  # first seen taken: a live worker may be starting it
    clock.advance(2.4)
    assert relay.sweep_once() == 0
    clock.advance(0.1)
    assert relay.sweep_once() == 4  # taken half a sweep interval ago, never started: lost
    assert count(runtime, "SELECT max(lost_dispatches) FROM outbox") == 0  # nothing ran
    assert relay.relay_once() == 4
    assert job_id not in jobs_of(runtime)
    assert queue.count == 1


def test_a_job_dispatched_within_the_grace_is_not_even_looked_at(client, runtime):
    clock = clocked(runtime, dispatch_grace_seconds=10)
    relay, queue, _ = one_job(client, runtime, 2)
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    clock.advance(9)
    assert relay.sweep_once() == 0  # handed out 9 s ago: not a candidate yet
    assert not queue.connection.keys(f"{SUSPECT_PREFIX}{queue.name}:*")  # not looked at
    clock.advance(1.5)
    assert second_sweep(relay, clock) == 2


def test_a_second_relay_sees_the_same_first_sighting_of_a_taken_job(client, runtime):
    clock = clocked(runtime, sweep_interval_seconds=5)
    first, queue, _ = one_job(client, runtime, 2)
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert first.sweep_once() == 0
    clock.advance(5)
    second, _ = relay_for(runtime)  # another relay, or this one restarted
    assert second.sweep_once() == 2


def test_a_job_started_moments_ago_without_its_lease_yet_is_left_alone(client, runtime):
    """RQ marks a job started a moment before the job takes its lease."""
    clock = clocked(runtime, sweep_interval_seconds=5)
    relay, queue, job_id = one_job(client, runtime, 3)
    Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
    queue.remove(job_id)
    assert relay.sweep_once() == 0  # started, no lease: it may be about to take it
    clock.advance(2)
    assert relay.sweep_once() == 0
    clock.advance(3)
    assert relay.sweep_once() == 3  # still no lease a sweep interval later: it died
    assert count(runtime, "SELECT min(lost_dispatches) FROM outbox") == 1


def test_a_job_seen_starting_and_then_running_is_judged_afresh_when_its_lease_goes(client, runtime):
    """A sighting from before the job took its lease does not count once it has: when the
    lease goes, the job is a new suspect, not one already overdue."""
    clock = clocked(runtime, sweep_interval_seconds=5)
    relay, queue, job_id = one_job(client, runtime, 2)
    Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
    queue.remove(job_id)
    assert relay.sweep_once() == 0  # seen started without its lease
    with job_lease(runtime.engine, job_id):
        clock.advance(10)
        assert relay.sweep_once() == 0  # running
    assert second_sweep(relay, clock) == 2


def test_a_job_missing_from_redis_whose_lease_is_held_is_left_running(client, runtime):
    """Redis lost the job (a restart without persistence), but its process runs on."""
    relay, queue, job_id = one_job(client, runtime, 2)
    Job.fetch(job_id, connection=queue.connection).delete()
    with job_lease(runtime.engine, job_id):
        assert relay.sweep_once() == 0
    assert relay.sweep_once() == 2


def test_the_sweep_pages_through_every_job_and_comes_back_to_its_suspects(client, runtime):
    """Pages go on from the last job examined: a lost job behind two pages of live ones is
    found on the third sweep, and a suspect is judged again on the very next sweep."""
    clock = clocked(runtime, job_size=1, sweep_interval_seconds=5)
    ingest(client, runtime, 5)
    relay, queue = relay_for(runtime)
    relay.sweep.page = 2
    assert relay.relay_once() == 5
    with runtime.engine.connect() as c:
        oldest_first = [
            r[0] for r in c.exec_driver_sql("SELECT job_id FROM outbox ORDER BY job_id")
        ]
    queue.remove(oldest_first[4])  # lost: on the third page
    Job.fetch(oldest_first[4], connection=queue.connection).delete()
    queue.connection.lrem(queue.key, 1, oldest_first[0])  # taken, never started: page one
    queue.connection.rpush(queue.intermediate_queue_key, oldest_first[0])
    assert relay.sweep_once() == 0  # page one: a suspect, and one alive
    clock.advance(2.5)
    assert relay.sweep_once() == 1  # page two (both alive), and the suspect, now lost
    assert relay.sweep_once() == 1  # page three: the job Redis lost
    assert relay.sweep_once() == 0  # back to page one
    assert count(runtime, WAITING) == 2


def test_without_lpos_the_queue_is_read_whole(client, runtime):
    """Redis before 6.0.6 has no LPOS: the sweep reads the queue's list instead."""
    clock = clocked(runtime, sweep_interval_seconds=5)
    ingest(client, runtime, 3)
    relay, queue = relay_for(runtime)
    relay.sink._lpos = False
    relay.relay_once()
    assert relay.sweep_once() == 0  # queued, found in the list
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert second_sweep(relay, clock) == 3


def test_without_postgresql_a_job_gone_from_redis_is_still_lost(settings, router, tmp_path):
    """SQLite has no advisory locks: RQ's "started" is all there is to go by, and a job
    missing from Redis, finished or failed is not running."""
    from dataclasses import replace

    from alembic import command

    from hooklatch import create_app
    from hooklatch.migrations import alembic_config

    url = f"sqlite:///{tmp_path / 'store.sqlite3'}"
    command.upgrade(alembic_config(url), "head")
    app = create_app(replace(settings, database_url=url), router=router)
    runtime = app.extensions["hooklatch"]
    try:
        clock = clocked(runtime)
        relay, queue, job_id = one_job(app.test_client(), runtime, 3)
        Job.fetch(job_id, connection=queue.connection).delete()
        clock.advance(1)
        assert relay.sweep_once() == 3
        assert relay.relay_once() == 3
        assert job_id not in jobs_of(runtime)
    finally:
        runtime.dispose()


def test_an_event_locked_when_its_job_is_given_up_keeps_its_count(client, runtime):
    """A worker holds the event while the sweep gives its lost job up: the outbox row,
    and the count of lost jobs on it, stay until the event can be judged."""
    from sqlalchemy import text

    clock = clocked(runtime, max_lost_dispatches=1)
    relay, queue, job_id = one_job(client, runtime, 1)
    Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
    queue.remove(job_id)
    with runtime.engine.connect() as holder:
        holder.execute(text("SELECT id FROM events FOR NO KEY UPDATE"))  # a worker on it
        second_sweep(relay, clock)
        assert count(runtime, "SELECT count(*) FROM outbox") == 1
        assert count(runtime, "SELECT lost_dispatches FROM outbox") == 1
        holder.rollback()  # that worker died too
    assert relay.relay_once() == 1  # out again, with its count: lost once more, it is dead
    [job_id] = jobs_of(runtime)
    Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
    queue.remove(job_id)
    second_sweep(relay, clock)
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'dead'") == 1
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
