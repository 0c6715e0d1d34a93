"""The relay moves each outbox row once, and re-dispatches only work that is really lost."""

import threading

from rq.job import Job, JobStatus

from hooklatch.workers.lease import job_lease
from tests.support.database import count
from tests.support.relay import WAITING, clocked, ingest, jobs_of, one_job, relay_for, second_sweep

SECRET = "whsec_test_secret"


def test_events_share_jobs_in_batches(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(runtime.settings, job_size=4)
    ingest(client, runtime, 10)
    relay, queue = relay_for(runtime)
    assert relay.relay_once() == 10
    assert queue.count == 3  # 4 + 4 + 2 events
    assert count(runtime, WAITING) == 0
    assert len(jobs_of(runtime)) == 3


def test_work_arriving_while_a_job_waits_stays_in_the_outbox_and_goes_out_in_one_job(
    client, runtime
):
    """A job cut at every poll carries what arrived in 50 ms; held back while a job waits
    for a worker, the outbox fills and the next job carries all of it."""
    relay, queue = relay_for(runtime)
    ingest(client, runtime, 3)
    assert relay.relay_once() == 3
    assert queue.count == 1
    for _ in range(5):  # more events arrive; five polls while the job waits
        ingest(client, runtime, 2)
        assert relay.relay_once() == 0
    assert count(runtime, WAITING) == 10
    queue.pop_job_id()  # a worker takes the job
    assert relay.relay_once() == 10
    assert queue.count == 1  # one job of the ten
    assert count(runtime, WAITING) == 0
    assert len(jobs_of(runtime)) == 2


def test_sweep_leaves_a_healthy_queued_backlog_alone(client, runtime):
    ingest(client, runtime, 10)
    relay, queue = relay_for(runtime)
    relay.relay_once()
    for _ in range(5):
        assert relay.sweep_once() == 0
    assert queue.count == 1
    assert count(runtime, WAITING) == 0


def test_work_whose_job_vanished_from_redis_is_dispatched_again(client, runtime):
    relay, queue, lost = one_job(client, runtime, 10)
    Job.fetch(lost, connection=queue.connection).delete()  # as a Redis restart without persistence
    assert relay.sweep_once() == 10
    assert relay.relay_once() == 10
    assert lost not in jobs_of(runtime)
    # Redis lost the job; no process died under it: nothing counts against the events.
    assert count(runtime, "SELECT max(lost_dispatches) FROM outbox") == 0
    assert queue.count == 1


def test_a_started_job_is_alive_while_its_lease_is_held_and_lost_when_it_is_not(client, runtime):
    clock = clocked(runtime)
    relay, queue, job_id = one_job(client, runtime, 3)
    job = Job.fetch(job_id, connection=queue.connection)
    job.set_status(JobStatus.STARTED)
    with job_lease(runtime.engine, job_id):
        assert relay.sweep_once() == 0  # a live process is running it
        clock.advance(60)
        assert relay.sweep_once() == 0
    # That process died: its lease went with it.
    assert second_sweep(relay, clock) == 3


def test_two_relays_at_once_move_each_outbox_row_exactly_once(client, runtime):
    from dataclasses import replace

    # Every pass hands out work, however many jobs wait: the relays race on each row.
    runtime.settings = replace(runtime.settings, relay_batch_size=7, job_size=1, queued_jobs=100)
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
    clock = clocked(runtime, max_lost_dispatches=3)
    relay, queue, _ = one_job(client, runtime, 3)
    assert queue.count == 1  # one job for the three

    def lose_every_job():
        # As when the process running each job died: started, and nobody holds its lease.
        for job_id in queue.job_ids:
            Job.fetch(job_id, connection=queue.connection).set_status(JobStatus.STARTED)
            queue.remove(job_id)

    for round_ in (1, 2):
        lose_every_job()
        assert second_sweep(relay, clock) == 3
        assert count(runtime, "SELECT min(lost_dispatches) FROM outbox") == round_
        assert relay.relay_once() == 3
        assert queue.count == 3  # each alone now

    lose_every_job()
    second_sweep(relay, clock)
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'dead'") == 3
    errors = count(
        runtime, "SELECT count(*) FROM attempts WHERE error LIKE '%lost 3 times without%'"
    )
    assert errors == 3
