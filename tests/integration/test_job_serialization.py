"""Jobs on hooklatch's queue are JSON, and `hooklatch worker` never unpickles one: a
job someone with write access to Redis pushed as a pickle fails, unrun."""

import json
import pathlib
import zlib

import pytest
from redis import Redis
from rq import Queue
from rq.job import Job

from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint
from tests.support.processes import hooklatch_cmd, process_env
from tests.support.relay import jobs_of, relay_for


class Gadget:
    """Unpickling this creates a file: what a hostile pickle would do instead."""

    def __init__(self, path):
        self.path = pathlib.Path(path)

    def __reduce__(self):
        return pathlib.Path.touch, (self.path,)


def raw_job_data(redis, job_id):
    return json.loads(zlib.decompress(redis.hget(Job.key_for(job_id), "data")))


def test_a_job_on_the_queue_is_json_of_ids(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_json_job")
    relay, queue = relay_for(runtime)
    relay.relay_once()
    [job_id] = jobs_of(runtime)
    assert raw_job_data(queue.connection, job_id) == [
        "hooklatch.workers.worker.jobs.process_batch",
        None,
        [[event_id], []],
        {},
    ]


@pytest.mark.slow
def test_the_worker_fails_a_pickled_job_without_running_it(
    client, runtime, proc_settings, procs, tmp_path
):
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_beside_pickles")
    relay, _ = relay_for(runtime)
    relay.relay_once()
    ran, unpickled = tmp_path / "ran", tmp_path / "unpickled"
    redis = Redis.from_url(proc_settings.redis_url)
    hostile = Queue(proc_settings.queue_name, connection=redis)  # RQ's default: pickle
    called = hostile.enqueue(pathlib.Path(ran).touch)
    loaded = hostile.enqueue(print, Gadget(unpickled))

    worker = procs("worker", hooklatch_cmd("worker", "--burst"), process_env(proc_settings))
    assert worker.popen.wait(timeout=60) == 0, worker.log()

    assert not ran.exists() and not unpickled.exists(), worker.log()
    for job in (called, loaded):
        assert redis.hget(job.key, "status") == b"failed", worker.log()
    status = "SELECT count(*) FROM events WHERE id = :i AND status = 'ignored'"
    assert count(runtime, status, i=event_id) == 1, worker.log()
