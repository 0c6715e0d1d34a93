"""The RQ workers `hooklatch worker` runs, named as RQ names its own: ``HooklatchWorker``
adds what hooklatch needs to any RQ worker; ``SimpleHooklatchWorker`` runs jobs in its own
process (RQ's ``SimpleWorker``), which is what `hooklatch worker` runs, in a long-lived
work horse (``horse``); ``ForkingHooklatchWorker`` forks a horse per job (RQ's ``Worker``).
"""

from __future__ import annotations

import logging
import os

from redis.client import Pipeline
from rq import Queue, SimpleWorker, Worker
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.exceptions import StopRequested
from rq.job import Job
from rq.worker import BaseWorker, WorkerStatus

from hooklatch.workers.worker import jobs
from hooklatch.workers.worker.horse import HorseForker

# The start-up line is logged under the command's module, which log filters may already select.
log = logging.getLogger("hooklatch.workers.worker.main")


class HooklatchWorker(BaseWorker):
    """An RQ worker that stops in bounded time once asked to, and tells the forker of the
    horse it runs in (``forker``) which job it runs, and how many it has run
    (``jobs_done``).

    Idle: RQ's signal handler raises StopRequested wherever the worker is. While Redis is
    away RQ logs each failed retry, and a StopRequested raised inside that log call is
    swallowed by logging (an exception in a handler is reported, not raised): RQ then
    retried for ever and SIGTERM did not stop the worker. Each retry begins with a
    heartbeat; there, a stop already taken by an idle worker is raised again.

    Busy: RQ's warm shutdown waits for the whole job, up to a thousand events. The job is
    told to stop after the chunk under way (it runs in this process); a horse still at
    work ``HOOKLATCH_WORKER_STOP_SECONDS`` later is killed by the worker that forked it.
    """

    forker: HorseForker | None = None  # set when the worker runs in a forked horse
    jobs_done: int = 0

    def bootstrap(
        self,
        logging_level: str | None = "INFO",
        date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
        log_format: str = DEFAULT_LOGGING_FORMAT,
    ) -> None:
        # RQ's own start-up lines are below the WARNING level the worker runs at.
        super().bootstrap(logging_level, date_format, log_format)
        if self.forker is not None and self.forker.listening_said:
            return  # a later horse of the same worker: it starts quietly
        log.info(
            "worker listening on queues %s (pid %d)",
            ", ".join(self.queue_names()),
            os.getppid() if self.forker is not None else os.getpid(),
        )
        if self.forker is not None:
            self.forker.note_listening_said()

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        if asked_to_stop(self) and self.get_state() != WorkerStatus.BUSY:
            raise StopRequested()
        super().heartbeat(timeout, pipeline)

    def handle_warm_shutdown_request(self) -> None:
        super().handle_warm_shutdown_request()  # type: ignore[no-untyped-call]  # RQ's
        jobs.stop_between_chunks()

    def execute_job(self, job: Job, queue: Queue) -> None:
        if self.forker is not None:
            self.forker.note_job(job.id, job.timeout)
        try:
            super().execute_job(job, queue)
        finally:
            self.jobs_done += 1
            if self.forker is not None:
                self.forker.note_job(None)


class SimpleHooklatchWorker(HooklatchWorker, SimpleWorker):
    """Runs each job in this process."""


class ForkingHooklatchWorker(HooklatchWorker, Worker):
    """Forks a horse for each job."""


def asked_to_stop(worker: BaseWorker | None) -> bool:
    """Whether RQ's signal handler took a SIGTERM or SIGINT meant for this worker."""
    return worker is not None and getattr(worker, "_shutdown_requested_date", None) is not None
