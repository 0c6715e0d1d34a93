"""The same delivery arriving many times at once, on a real gunicorn with several workers."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from redis import Redis
from rq import Queue
from sqlalchemy import text

from hooklatch.jobs import SERIALIZER
from tests.support.database import count
from tests.support.pipeline import make_endpoint, wait_drained, wait_for
from tests.support.processes import hooklatch_cmd, process_env, start_gunicorn
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
COPIES = 50


def event_status(runtime, external_id):
    with runtime.engine.connect() as c:
        return c.execute(
            text("SELECT status FROM events WHERE external_id = :x"), {"x": external_id}
        ).scalar_one_or_none()


@pytest.mark.slow
def test_one_event_delivered_50_times_concurrently_is_stored_and_handled_once(
    procs, proc_settings, runtime
):
    base, web = start_gunicorn(procs, proc_settings, workers=2)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    external_id = "evt_concurrent_1"
    body = stripe_event(external_id, event_type="effect.concurrent")
    headers = stripe_headers(body, SECRET)
    url = f"{base}/hooks/{endpoint}"
    barrier = threading.Barrier(COPIES)

    def send(_):
        barrier.wait(timeout=30)
        response = requests.post(url, data=body, headers=headers, timeout=30)
        return response.status_code, response.json()

    with ThreadPoolExecutor(COPIES) as pool:
        answers = list(pool.map(send, range(COPIES)))

    assert [code for code, _ in answers] == [200] * COPIES, (answers, web.log())
    statuses = [json["status"] for _, json in answers]
    assert statuses.count("accepted") == 1, statuses
    assert statuses.count("duplicate") == COPIES - 1, statuses
    # Every answer names the same stored event.
    assert len({json["events"][0]["id"] for _, json in answers}) == 1
    assert count(runtime, "SELECT count(*) FROM events") == 1
    assert count(runtime, "SELECT count(*) FROM outbox") == 1

    env = process_env(proc_settings)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    try:
        wait_for(
            lambda: event_status(runtime, external_id) == "processed",
            timeout=30,
            message="event processed",
        )
        redis = Redis.from_url(proc_settings.redis_url)
        queue = Queue(proc_settings.queue_name, connection=redis, serializer=SERIALIZER)
        # Let every queued or running job finish before counting effects.
        wait_drained(runtime, queue)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nrelay:\n{relay.log()}\nworker:\n{worker.log()}") from None
    assert (
        count(runtime, "SELECT count(*) FROM test_effects WHERE external_id = :x", x=external_id)
        == 1
    )
    assert count(runtime, "SELECT attempts FROM events WHERE external_id = :x", x=external_id) == 1
    assert relay.popen.poll() is None and worker.popen.poll() is None
