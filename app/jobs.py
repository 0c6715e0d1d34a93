"""The job contract: what a relay hands to RQ and a worker takes from it, written once.

A job is the function named ``JOB_FUNCTION`` called with a handoff's ids (``Handoff``):
the events to run, and the replays to run, as two lists of ids (one of them empty). It
goes to the live queue; events a reconcile fetched go to the fetched queue, and replays
to the replay queue, which workers read after it, in that order (``queue_names``). The
relay (``hooklatch.workers.relay``) writes jobs with ``enqueue_data``; the worker
(``hooklatch.workers.worker``) reads them with the same ``SERIALIZER``; neither imports
the other.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from rq import Queue
from rq.queue import EnqueueData
from rq.serializers import JSONSerializer

from hooklatch.settings import Settings

# Jobs already queued in Redis name their function by this path: it stays, whatever the
# module's name becomes.
JOB_FUNCTION = "hooklatch.workers.worker.jobs.process_batch"
# A job's arguments are lists of ids: JSON carries them, so no worker ever unpickles what
# it finds in Redis (RQ's default, pickle, runs code when it loads a job).
SERIALIZER = JSONSerializer
# How long RQ keeps a job's result, and a failed job, in Redis.
RESULT_TTL_SECONDS = 3600
FAILURE_TTL_SECONDS = 7 * 24 * 3600
# Events a reconcile fetched, per job at most. A worker takes the next live job before
# the next fetched one, so a live event stored during a catch-up waits for one such job
# at most: a job's worth of handlers. (Handing a fetched job's rest back between chunks
# whenever live work waited, as replays do, cut a catch-up with 30 ms handlers from 23.7
# to 8.6 fetched events a second while live ones came at 10 a second: docs/benchmarks.md.)
FETCHED_JOB_SIZE = 200


@dataclass
class Handoff:
    """The work one job is handed: events' ids or replays' ids, never both; ``fetched``
    for events a reconcile fetched. ``job_id`` is set when it is handed over."""

    event_ids: list[int] = field(default_factory=list)
    replay_ids: list[int] = field(default_factory=list)
    fetched: bool = False
    job_id: str = ""

    def arguments(self) -> tuple[list[int], list[int]]:
        """The job function's arguments: ``(event_ids, replay_ids)``."""
        return self.event_ids, self.replay_ids

    def timeout_seconds(self) -> int:
        """RQ's timeout for the job: half a minute per id, ten minutes at least."""
        return max(600, 30 * len(self.event_ids) + 30 * len(self.replay_ids))


def queue_names(settings: Settings) -> list[str]:
    """The live queue, the fetched queue, then the replay queue: a worker takes a job from
    the first that has one, so neither a reconcile's catch-up nor a replay waits in front
    of a live event."""
    return [settings.queue_name, settings.fetched_queue_name, settings.replay_queue_name]


def queue_name(settings: Settings, handoff: Handoff) -> str:
    """The queue a handoff's job goes to."""
    if handoff.replay_ids:
        return settings.replay_queue_name
    return settings.fetched_queue_name if handoff.fetched else settings.queue_name


def enqueue_data(handoff: Handoff) -> EnqueueData:
    """The job as RQ's ``Queue.enqueue_many`` takes it."""
    return Queue.prepare_data(
        JOB_FUNCTION,
        args=handoff.arguments(),
        timeout=handoff.timeout_seconds(),
        result_ttl=RESULT_TTL_SECONDS,
        failure_ttl=FAILURE_TTL_SECONDS,
    )


def inline_job_id() -> str:
    """The id of a job that runs in the process that hands it over (no Redis)."""
    return f"inline-{uuid.uuid4()}"
