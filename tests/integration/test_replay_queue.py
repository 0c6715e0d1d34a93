"""Replays travel on a queue of their own, which workers read after the live queue; a
replay's job makes way for live work between two replays; a bulk replay asks for replays
only while few wait to be run; cancelling a batch cancels its replays not started, and
says how many on every face."""

from __future__ import annotations

import json
from datetime import timedelta

from redis import Redis
from rq import Queue, SimpleWorker
from sqlalchemy import text

from hooklatch.events import bulk_replays
from hooklatch.jobs import SERIALIZER
from hooklatch.workers.worker import jobs
from tests.support.bulk_replays import begin_bulk_replay, step
from tests.support.cli import run_cli
from tests.support.console import csrf_of, signed_in
from tests.support.database import count, load_event
from tests.support.pipeline import deliver, drain, make_dead, make_endpoint, runs_of
from tests.support.relay import WAITING, Clock, relay_for
from tests.support.tokens import AUTH


def replay(client, event_id):
    answer = client.post(f"/admin/events/{event_id}/replay", json={"reason": "r"}, headers=AUTH)
    assert answer.status_code == 202, answer.json
    return answer.json["id"]


def replay_queue(runtime):
    redis = Redis.from_url(runtime.settings.redis_url)
    return Queue(runtime.settings.replay_queue_name, connection=redis, serializer=SERIALIZER)


def statuses(runtime, batch_id):
    with runtime.engine.connect() as c:
        query = text("SELECT event_id, status FROM replays WHERE batch_id = :b")
        return dict(c.execute(query, {"b": batch_id}).all())


def test_replays_go_to_a_queue_of_their_own_and_each_queue_is_held_back_alone(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    dead = make_dead(client, runtime, endpoint, "evt_q1", "evt_q2", "evt_q3", event_type="x.y")
    live = deliver(client, endpoint, "evt_live_1")
    replay_ids = [replay(client, dead[0]), replay(client, dead[1])]
    relay, queue = relay_for(runtime)
    replays = replay_queue(runtime)

    assert relay.relay_once() == 3
    assert [list(job.args) for job in queue.jobs] == [[[live], []]]
    assert [list(job.args) for job in replays.jobs] == [[[], replay_ids]]  # one job for both

    deliver(client, endpoint, "evt_live_2")
    replay(client, dead[2])
    assert relay.relay_once() == 0  # a job waits in each queue: both rows wait in the outbox
    replays.connection.lpop(replays.key)  # a worker takes the replays' job
    assert relay.relay_once() == 1  # the replay goes out; the event waits for its queue
    assert count(runtime, WAITING) == 1
    assert (queue.count, replays.count) == (1, 1)


def test_the_sweep_knows_a_replay_job_waiting_on_its_queue_and_one_taken_off_it(client, runtime):
    from dataclasses import replace

    runtime.settings = replace(
        runtime.settings, dispatch_grace_seconds=10, sweep_interval_seconds=5
    )
    runtime.clock = clock = Clock()
    endpoint, _ = make_endpoint(runtime)
    [dead] = make_dead(client, runtime, endpoint, "evt_swept", event_type="x.y")
    replay(client, dead)
    relay, _ = relay_for(runtime)
    replays = replay_queue(runtime)
    assert relay.relay_once() == 1
    clock.advance(11)
    assert relay.sweep_once() == 0
    clock.advance(5)
    assert relay.sweep_once() == 0  # still in the replay queue's list: waiting, not lost

    replays.connection.lpop(replays.key)  # a worker that died as it took the job
    assert relay.sweep_once() == 0  # first seen taken: a live worker may be starting it
    clock.advance(2.5)
    assert relay.sweep_once() == 1  # still taken and never started: lost, handed out again
    assert relay.relay_once() == 1
    assert replays.count == 1


def test_a_replay_job_hands_its_other_replays_back_when_live_work_waits(client, runtime, router):
    ran = []
    router.on("stripe", "*")(lambda event, ctx: ran.append(event.external_id))
    endpoint, _ = make_endpoint(runtime)
    names = ["evt_r1", "evt_r2", "evt_r3"]
    dead = make_dead(client, runtime, endpoint, *names, event_type="x.y")
    replay_ids = [replay(client, event_id) for event_id in dead]
    relay, queue = relay_for(runtime)
    assert relay.relay_once() == 3  # one job of three replays
    deliver(client, endpoint, "evt_live")
    assert relay.relay_once() == 1  # a live job waits meanwhile
    jobs.install(runtime)
    replays = replay_queue(runtime)
    # A worker that reads the replay queue alone, so the live job stays where it is.
    worker = SimpleWorker([replays.name], connection=replays.connection, serializer=SERIALIZER)

    worker.work(burst=True, logging_level="WARNING")

    assert ran == ["evt_r1"]  # one replay, then the job made way
    with runtime.engine.connect() as c:
        rows = c.execute(text("SELECT replay_id, job_id FROM outbox WHERE replay_id IS NOT NULL"))
        assert dict(rows.all()) == {replay_ids[1]: None, replay_ids[2]: None}  # handed back
    assert queue.count == 1
    drain(runtime)
    assert sorted(ran) == sorted([*names, "evt_live"])  # each once


def test_a_batch_asks_for_replays_only_while_fewer_than_its_window_wait(client, runtime, router):
    router.on("stripe", "*")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    names = [f"evt_w{n}" for n in range(6)]
    make_dead(client, runtime, endpoint, *names, event_type="x.y")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, now=t0)
    [other] = make_dead(client, runtime, endpoint, "evt_by_hand", event_type="x.y")
    replay(client, other)  # a replay asked for by hand waits too

    assert step(runtime, t0 + timedelta(seconds=1), window=3) == 2
    assert step(runtime, t0 + timedelta(seconds=2), window=3) == 0  # three wait
    drain(runtime)
    assert step(runtime, t0 + timedelta(seconds=3), window=3) == 3
    drain(runtime)
    assert step(runtime, t0 + timedelta(seconds=4), window=3) == 1
    assert step(runtime, t0 + timedelta(seconds=5), window=3) == 0
    with runtime.session_factory() as session:
        shown = bulk_replays.describe(session, bulk_replays.get(session, batch_id))
    assert (shown["status"], shown["replayed"], shown["left"]) == ("done", 6, 0)


def test_a_batch_held_back_by_its_window_does_not_catch_up_in_a_burst(client, runtime, router):
    router.on("stripe", "*")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, *[f"evt_b{n}" for n in range(6)], event_type="x.y")
    t0 = runtime.clock()
    begin_bulk_replay(runtime, rate=2.0, now=t0)

    assert step(runtime, t0 + timedelta(seconds=1), window=2) == 2
    assert step(runtime, t0 + timedelta(seconds=3), window=2) == 0  # two seconds' share spent
    drain(runtime)
    assert step(runtime, t0 + timedelta(seconds=3.5), window=2) == 1  # half a second's


def test_cancelling_cancels_the_replays_not_started_and_a_queued_job_skips_them(
    client, runtime, router
):
    ran = runs_of(router)
    endpoint, _ = make_endpoint(runtime)
    dead = make_dead(client, runtime, endpoint, *[f"evt_c{n}" for n in range(4)], event_type="x.y")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 4
    relay, _ = relay_for(runtime)
    assert relay.relay_once() == 4  # their job waits in the replay queue

    answer = client.post(f"/admin/replays/{batch_id}/cancel", json={}, headers=AUTH)

    assert answer.status_code == 200, answer.json
    assert answer.json["replays_cancelled"] == 4
    assert (answer.json["status"], answer.json["replays"]) == ("cancelled", {"cancelled": 4})
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    drain(runtime, until=lambda: replay_queue(runtime).count == 0)  # the job runs, skips all
    assert ran == []
    assert {load_event(runtime, i).status for i in dead} == {"dead"}
    [entry, _] = client.get("/admin/audit", headers=AUTH).json["entries"]
    assert entry["action"] == "bulk_replay_cancelled"
    assert entry["details"]["replays_cancelled"] == 4


def test_a_replay_running_when_its_batch_is_cancelled_finishes(client, runtime, router):
    ran = runs_of(router)
    endpoint, _ = make_endpoint(runtime)
    first, second = make_dead(client, runtime, endpoint, "evt_run1", "evt_run2", event_type="x.y")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 2
    running = "SELECT id FROM replays WHERE event_id = :e FOR UPDATE"

    with runtime.engine.begin() as worker:  # holds the row lock, as a worker running it does
        worker.execute(text(running), {"e": first})
        answer = client.post(f"/admin/replays/{batch_id}/cancel", json={}, headers=AUTH)

    assert answer.json["replays_cancelled"] == 1
    assert statuses(runtime, batch_id) == {first: "pending", second: "cancelled"}
    drain(runtime)
    assert ran == [first]
    assert statuses(runtime, batch_id) == {first: "succeeded", second: "cancelled"}


def test_the_cli_cancels_a_finished_batchs_waiting_replays_and_says_how_many(
    client, runtime, settings
):
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, "evt_cli1", "evt_cli2", event_type="x.y")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 2
    assert step(runtime, t0 + timedelta(seconds=2)) == 0  # every item asked for: done

    shown = json.loads(run_cli(settings, "events", "batch", str(batch_id), "--cancel").output)

    assert (shown["status"], shown["replays_cancelled"]) == ("cancelled", 2)
    assert shown["replays"] == {"cancelled": 2}
    again = json.loads(run_cli(settings, "events", "batch", str(batch_id), "--cancel").output)
    assert again["replays_cancelled"] == 0
    actions = "SELECT count(*) FROM audit_log WHERE action = 'bulk_replay_cancelled'"
    assert count(runtime, actions) == 1  # the second cancel changed nothing


def test_the_console_says_how_many_replays_a_cancel_stopped(app, client, runtime):
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, "evt_con1", "evt_con2", "evt_con3", event_type="x.y")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 3
    console, _ = signed_in(app)
    page = console.get(f"/admin/console/replays/{batch_id}")

    answer = console.post(
        f"/admin/console/replays/{batch_id}/cancel",
        data={"csrf_token": csrf_of(page)},
        follow_redirects=True,
    )

    shown = answer.get_data(as_text=True)
    assert "3 replays asked for and not started were cancelled" in shown
    assert '<span class="status cancelled">cancelled 3</span>' in shown
