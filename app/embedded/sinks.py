"""Where a relay hands its work, chosen as the process is put together: RQ's queues, or,
with no Redis (the embedded default), the relay's own thread (``InlineSink``), which runs
the worker's job there. Here, above both, so that the relay never imports the worker."""

from __future__ import annotations

from hooklatch.jobs import Handoff, inline_job_id
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.sinks import RQSink, Sink, Verdicts, Waiting
from hooklatch.workers.worker.jobs import process_events, process_replays


class InlineSink:
    """Runs the handoffs in this process after the outbox commit (no Redis)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def push(self, handoffs: list[Handoff]) -> None:
        for handoff in handoffs:
            handoff.job_id = inline_job_id()

    def after_commit(self, handoffs: list[Handoff]) -> None:
        for handoff in handoffs:
            process_events(self.runtime, handoff.event_ids, job_id=handoff.job_id)
            process_replays(self.runtime, handoff.replay_ids, job_id=handoff.job_id)

    def check(self, job_ids: list[str]) -> Verdicts:
        # Work runs synchronously between passes: a row still handed out afterwards was
        # left by a pass that failed, and goes out again.
        return Verdicts()

    def waiting(self) -> Waiting:
        return Waiting()  # each pass's work has run before the next pass


def make_sink(runtime: Runtime) -> Sink:
    redis_url = runtime.settings.redis_url
    return InlineSink(runtime) if redis_url is None else RQSink.connect(runtime, redis_url)
