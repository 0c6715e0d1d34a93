"""The relay moves each outbox row once, and re-dispatches only work that is really lost."""

import threading
from datetime import timedelta

from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus

from hooklatch.db import utcnow
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import SUSPECT_PREFIX, RQSink
from hooklatch.workers.worker.lease import job_lease
from tests.conftest import count, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def ingest(client, runtime, n):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    for i in range(n):
        body = stripe_event(f"evt_relay_{i}")
        response = client.post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
        )
        assert response.status_code == 200


def relay_for(runtime):
    redis = Redis.from_url(runtime.settings.redis_url)
    return Relay(runtime, RQSink(runtime, redis)), Queue(
        runtime.settings.queue_name, connection=redis
    )


def jobs_of(runtime):
    with runtime.engine.connect() as c:
        return {r[0] for r in c.exec_driver_sql("SELECT DISTINCT job_id FROM outbox")}


WAITING = "SELECT count(*) FROM outbox WHERE job_id IS NULL"


class Clock:
    """runtime.clock, moved by hand."""

    def __init__(self):
        self.now = utcnow()

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += timedelta(seconds=seconds)


def sweep_after_a_sighting(relay, clock) -> int:
    """A job that is neither queued nor holding its lease is lost only when a later sweep,
    half a sweep interval or more after the first sighting, still finds it so."""
    assert relay.sweep_once() == 0
    clock.advance(relay.settings.sweep_interval_seconds)
    return relay.sweep_once()


def test_events_share_jobs_in_batches(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, job_size=4)
    ingest(client, runtime, 10)
    relay, queue = relay_for(runtime)
    assert relay.relay_once() == 10
    assert queue.count == 3  # 4 + 4 + 2 events
    assert count(runtime, WAITING) == 0
    assert len(jobs_of(runtime)) == 3


def test_sweep_leaves_a_healthy_queued_backlog_alone(client, runtime):
    ingest(client, runtime, 10)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    for _ in range(5):
        assert relay.sweep_once() == 0
    assert queue.count == 1
    assert count(runtime, WAITING) == 0


def test_work_whose_job_vanished_from_redis_is_dispatched_again(client, runtime):
    ingest(client, runtime, 10)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [lost] = jobs_of(runtime)
    Job.fetch(lost, connection=queue.connection).delete()  # as a Redis restart without persistence
    assert relay.sweep_once() == 10
    assert relay.relay_once() == 10
    assert lost not in jobs_of(runtime)
    # Redis lost the job; no process died under it: nothing counts against the events.
    assert count(runtime, "SELECT max(lost_dispatches) FROM outbox") == 0
    assert queue.count == 1


def test_a_started_job_is_alive_while_its_lease_is_held_and_lost_when_it_is_not(client, runtime):
    runtime.clock = clock = Clock()
    ingest(client, runtime, 3)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [job_id] = jobs_of(runtime)
    job = Job.fetch(job_id, connection=queue.connection)
    job.set_status(JobStatus.STARTED)
    with job_lease(runtime.engine, job_id):
        assert relay.sweep_once() == 0  # a live process is running it
        clock.advance(60)
        assert relay.sweep_once() == 0
    # That process died: its lease went with it.
    assert sweep_after_a_sighting(relay, clock) == 3


def test_two_relays_at_once_move_each_outbox_row_exactly_once(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, relay_batch_size=7, job_size=1)
    ingest(client, runtime, 60)
    relays = [relay_for(runtime)[0] for _ in range(2)]
    moved = [0, 0]

    def run(i):
        while (n := relays[i].relay_once()) > 0:
            moved[i] += n

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sum(moved) == 60
    _, queue = relay_for(runtime)
    assert queue.count == 60
    assert len(jobs_of(runtime)) == 60


def test_a_worker_faster_than_the_relays_commit_still_runs_the_event(client, runtime):
    """The job can start before the relay commits its dispatch: the event must not be
    skipped as "locked" and left for the sweep."""
    from hooklatch.workers.worker.jobs import process_events

    ingest(client, runtime, 3)
    relay, _ = relay_for(runtime)
    push = relay.sink.push
    outcomes = []

    def push_and_work_at_once(batches):
        push(batches)
        [batch] = batches
        worker = threading.Thread(
            target=lambda: outcomes.append(
                process_events(runtime, batch.event_ids, job_id=batch.job_id)
            )
        )
        worker.start()
        # The worker claims and runs the events now; only its outbox delete waits for us.
        worker.join(timeout=1.0)
        relay.worker = worker

    relay.sink.push = push_and_work_at_once
    assert relay.relay_once() == 3
    relay.worker.join(timeout=10)
    assert outcomes == [{"ignored": 3}]
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'") == 0
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


def test_work_lost_again_and_again_goes_out_alone_then_its_event_is_dead(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, max_lost_dispatches=3)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 3)
    relay, queue = relay_for(runtime)

    def lose_every_job():
        # As when the process running each job died: started, and nobody holds its lease.
        for job_id in queue.job_ids:
            Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
            queue.remove(job_id)

    assert relay.relay_once() == 3
    assert queue.count == 1  # one job for the three
    for round_ in (1, 2):
        lose_every_job()
        assert sweep_after_a_sighting(relay, clock) == 3
        assert count(runtime, "SELECT min(lost_dispatches) FROM outbox") == round_
        assert relay.relay_once() == 3
        assert queue.count == 3  # each alone now

    lose_every_job()
    sweep_after_a_sighting(relay, clock)
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'dead'") == 3
    errors = count(
        runtime, "SELECT count(*) FROM attempts WHERE error LIKE '%lost 3 times without%'"
    )
    assert errors == 3


def test_a_job_taken_off_the_queue_but_never_started_is_lost_a_sweep_after_it_is_seen(
    client, runtime
):
    """A worker killed between taking a job (RQ moves it to its intermediate list) and
    starting it leaves the job "queued" in no queue. A live worker starts it within
    milliseconds, so the sweep acts only when it is still so half a sweep interval after
    a sweep first saw it."""
    from dataclasses import replace

    runtime.settings = replace(
        runtime.settings, dispatch_grace_seconds=10, sweep_interval_seconds=5
    )
    runtime.clock = clock = Clock()
    ingest(client, runtime, 4)
    relay, queue = relay_for(runtime)
    assert relay.relay_once() == 4
    [job_id] = jobs_of(runtime)
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
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, dispatch_grace_seconds=10)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 2)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    clock.advance(9)
    assert relay.sweep_once() == 0  # handed out 9 s ago: not a candidate yet
    assert not queue.connection.keys(f"{SUSPECT_PREFIX}{queue.name}:*")  # not looked at
    clock.advance(1.5)
    assert sweep_after_a_sighting(relay, clock) == 2


def test_a_second_relay_sees_the_same_first_sighting_of_a_taken_job(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, sweep_interval_seconds=5)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 2)
    first, queue = relay_for(runtime)
    first.relay_once()
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert first.sweep_once() == 0
    clock.advance(5)
    second, _ = relay_for(runtime)  # another relay, or this one restarted
    assert second.sweep_once() == 2


def test_a_job_started_moments_ago_without_its_lease_yet_is_left_alone(client, runtime):
    """RQ marks a job started a moment before the job takes its lease."""
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, sweep_interval_seconds=5)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 3)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [job_id] = jobs_of(runtime)
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
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, sweep_interval_seconds=5)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 2)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [job_id] = jobs_of(runtime)
    Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
    queue.remove(job_id)
    assert relay.sweep_once() == 0  # seen started without its lease
    with job_lease(runtime.engine, job_id):
        clock.advance(10)
        assert relay.sweep_once() == 0  # running
    assert sweep_after_a_sighting(relay, clock) == 2


def test_a_job_missing_from_redis_whose_lease_is_held_is_left_running(client, runtime):
    """Redis lost the job (a restart without persistence), but its process runs on."""
    ingest(client, runtime, 2)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [job_id] = jobs_of(runtime)
    Job.fetch(job_id, connection=queue.connection).delete()
    with job_lease(runtime.engine, job_id):
        assert relay.sweep_once() == 0
    assert relay.sweep_once() == 2


def test_the_sweep_pages_through_every_job_and_comes_back_to_its_suspects(client, runtime):
    """Pages go on from the last job examined: a lost job behind two pages of live ones is
    found on the third sweep, and a suspect is judged again on the very next sweep."""
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, job_size=1, sweep_interval_seconds=5)
    runtime.clock = clock = Clock()
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
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, sweep_interval_seconds=5)
    runtime.clock = clock = Clock()
    ingest(client, runtime, 3)
    relay, queue = relay_for(runtime)
    relay.sink._lpos = False
    relay.relay_once()
    assert relay.sweep_once() == 0  # queued, found in the list
    queue.connection.lmove(queue.key, queue.intermediate_queue_key)
    assert sweep_after_a_sighting(relay, clock) == 3
