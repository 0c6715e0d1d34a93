"""Events a reconcile fetched travel in a lane of their own: their outbox rows are marked,
the relay hands them to the fetched queue in jobs of FETCHED_JOB_SIZE, and workers read
it after the live queue. A catch-up of thousands never stands in front of a live
delivery: one fetched job at most. Fetched from FakeStripe, delivered as Stripe does."""

from __future__ import annotations

from collections import Counter

from redis import Redis
from rq import Queue, SimpleWorker
from sqlalchemy import text

from hooklatch.jobs import FETCHED_JOB_SIZE, SERIALIZER, queue_names
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import reconciler
from hooklatch.workers.worker import jobs
from tests.support.database import count
from tests.support.pipeline import runs_of
from tests.support.reconcile import stripe_and_app, stripe_registered
from tests.support.relay import clocked, relay_for

KEY = "rk_test_lanes_0123456789abcdef"
WAITING_FETCHED = "SELECT count(*) FROM outbox WHERE fetched AND job_id IS NULL"


def registered(runtime, fake) -> tuple[str, str]:
    return stripe_registered(runtime, fake, KEY)


def fetched(runtime, fake, endpoint, n: int) -> list[int]:
    """``n`` events Stripe never delivered, fetched by a reconcile: their ids here."""
    stamp = fake.now() - 300
    made = {
        str(fake.create_event("invoice.paid", {"id": f"in_{n}_{i}"}, stamp + i)["id"])
        for i in range(n)
    }
    run = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    assert (run["status"], run["fetched"]) == ("finished", n), run
    with runtime.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT id, external_id FROM events WHERE origin = 'api' ORDER BY id")
        ).all()
    return [row.id for row in rows if row.external_id in made]


def delivered(runtime, fake, hook: str, name: str) -> int:
    """A live event, delivered by Stripe as it happens: its id here."""
    event = fake.create_event("invoice.paid", {"id": name})
    assert fake.deliver(str(event["id"]), hook) == 200
    with runtime.engine.connect() as connection:
        return int(
            connection.execute(
                text("SELECT id FROM events WHERE external_id = :e"), {"e": event["id"]}
            ).scalar_one()
        )


def queues(runtime) -> tuple[Queue, Queue, Queue]:
    redis = Redis.from_url(runtime.settings.redis_url)
    live, fetched_queue, replays = (
        Queue(name, connection=redis, serializer=SERIALIZER)
        for name in queue_names(runtime.settings)
    )
    return live, fetched_queue, replays


def test_workers_read_the_fetched_queue_after_the_live_one_and_before_replays(runtime):
    names = queue_names(runtime.settings)
    queue = runtime.settings.queue_name
    assert names == [queue, f"{queue}-fetched", f"{queue}-replays"]


def test_fetched_events_go_to_a_queue_of_their_own_held_back_apart_from_the_live_one(app, runtime):
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake)
        caught_up = fetched(runtime, fake, endpoint, 5)
        assert count(runtime, WAITING_FETCHED) == 5
        live_id = delivered(runtime, fake, hook, "in_live_1")
        relay, _ = relay_for(runtime)
        live, fetched_queue, replays = queues(runtime)

        assert relay.relay_once() == 6
        assert [list(job.args) for job in live.jobs] == [[[live_id], []]]
        assert [list(job.args) for job in fetched_queue.jobs] == [[caught_up, []]]
        assert replays.count == 0

        more = fetched(runtime, fake, endpoint, 3)
        second = delivered(runtime, fake, hook, "in_live_2")
        assert relay.relay_once() == 0  # a job waits in each lane: every row waits
        live.connection.lpop(live.key)  # a worker takes the live job
        assert relay.relay_once() == 1  # the live event goes out; the fetched ones wait
        assert [list(job.args) for job in live.jobs] == [[[second], []]]
        assert count(runtime, WAITING_FETCHED) == 3
        fetched_queue.connection.lpop(fetched_queue.key)
        assert relay.relay_once() == 3
        assert [list(job.args) for job in fetched_queue.jobs] == [[more, []]]


def test_a_worker_takes_a_live_job_before_the_next_fetched_one(app, runtime, router):
    """A live event stored during a catch-up waits for the fetched job under way, at most,
    never for the catch-up's other jobs."""
    ran = runs_of(router)
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake)
        caught_up = fetched(runtime, fake, endpoint, FETCHED_JOB_SIZE + 5)
        relay, _ = relay_for(runtime)
        assert relay.relay_once() == FETCHED_JOB_SIZE + 5  # two fetched jobs
        live_id = delivered(runtime, fake, hook, "in_live")
        assert relay.relay_once() == 1  # the live job, queued after them
        jobs.install(runtime)
        live, _, _ = queues(runtime)
        worker = SimpleWorker(
            queue_names(runtime.settings), connection=live.connection, serializer=SERIALIZER
        )

        worker.work(burst=True, logging_level="WARNING")

    assert ran == [live_id, *caught_up]
    assert set(Counter(ran).values()) == {1}


def test_a_fetched_event_due_again_keeps_to_its_lane(app, runtime, router):
    """A fetched event whose handler failed gets its row back from the sweep when its
    retry is due: in the fetched lane still."""
    failures: list[int] = []

    def flaky(event, ctx):
        if not failures:
            failures.append(event.id)
            raise RuntimeError("downstream away")

    router.on("stripe", "*")(flaky)
    clock = clocked(runtime)
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        [event_id] = fetched(runtime, fake, endpoint, 1)
        relay, _ = relay_for(runtime)
        assert relay.relay_once() == 1
        jobs.install(runtime)
        _, fetched_queue, _ = queues(runtime)
        SimpleWorker(
            [fetched_queue.name], connection=fetched_queue.connection, serializer=SERIALIZER
        ).work(burst=True, logging_level="WARNING")
        assert failures == [event_id]
        assert count(runtime, "SELECT count(*) FROM outbox") == 0

        clock.advance(3600)
        assert relay.sweep_once() == 1

        assert count(runtime, WAITING_FETCHED) == 1


def test_fetched_events_go_out_in_jobs_of_at_most_fetched_job_size(app, runtime):
    """A live event waits for the fetched job under way: jobs of at most FETCHED_JOB_SIZE
    bound that wait to so many events' handlers."""
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        caught_up = fetched(runtime, fake, endpoint, FETCHED_JOB_SIZE + 5)
        relay, _ = relay_for(runtime)

        assert relay.relay_once() == FETCHED_JOB_SIZE + 5

    _, fetched_queue, _ = queues(runtime)
    assert [next(iter(job.args)) for job in fetched_queue.jobs] == [
        caught_up[:FETCHED_JOB_SIZE],
        caught_up[FETCHED_JOB_SIZE:],
    ]
