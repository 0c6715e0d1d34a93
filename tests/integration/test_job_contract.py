"""The job contract (hooklatch.jobs) holds both sides: the path queued jobs name is the
worker's function, and what the relay enqueues is what the worker reads."""

import inspect

from redis import Redis
from rq import SimpleWorker
from rq.job import Job
from rq.utils import import_attribute

from hooklatch.jobs import JOB_FUNCTION, SERIALIZER, Handoff, queue_name, queue_names
from hooklatch.workers.relay.sinks import RQSink
from hooklatch.workers.worker import jobs


def test_the_job_function_path_is_the_workers_function():
    assert JOB_FUNCTION == "hooklatch.workers.worker.jobs.process_batch"  # queued jobs name it
    assert import_attribute(JOB_FUNCTION) is jobs.process_batch


def test_what_the_relay_enqueues_the_worker_reads_as_it_was_handed_over(runtime):
    redis = Redis.from_url(runtime.settings.redis_url)
    handoffs = [Handoff(event_ids=[3, 1, 2]), Handoff(replay_ids=[8, 7])]
    RQSink(runtime, redis).push(handoffs)
    fetched = [Job.fetch(h.job_id, connection=redis, serializer=SERIALIZER) for h in handoffs]
    for handoff, job in zip(handoffs, fetched, strict=True):
        assert job.func is jobs.process_batch
        assert job.origin == queue_name(runtime.settings, handoff)
        read = inspect.signature(job.func).bind(*job.args, **job.kwargs).arguments
        assert Handoff(**read, job_id=job.id) == handoff

    # A worker on the contract's queues runs both (none of these ids is stored).
    jobs.install(runtime)
    worker = SimpleWorker(queue_names(runtime.settings), connection=redis, serializer=SERIALIZER)
    worker.work(burst=True, logging_level="WARNING")
    results = [Job.fetch(job.id, connection=redis, serializer=SERIALIZER) for job in fetched]
    assert [job.return_value() for job in results] == [{"skipped": 3}, {"replay_skipped": 2}]
