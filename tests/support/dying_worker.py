"""`hooklatch worker` that is SIGKILLed, with its work horse, at one point between taking
a job off the queue and the job taking its lease, as a container stopped at that moment.

HOOKLATCH_TEST_DIE_AT names the point, in the work horse:

- ``after_dequeue``: RQ has moved the job to the intermediate list, and not begun it;
- ``before_started``: RQ has begun the job's execution, and not marked it started;
- ``after_started``: RQ has marked the job started; the job has not taken its lease.
"""

import os
import signal

from hooklatch import logs
from hooklatch.assembly import build_runtime
from hooklatch.settings import Settings
from hooklatch.workers.worker.main import run_worker
from hooklatch.workers.worker.rq_workers import SimpleHooklatchWorker

DIE_AT = os.environ["HOOKLATCH_TEST_DIE_AT"]


def die() -> None:
    """The worker, then its horse (this process): nothing is left to replace the horse."""
    os.kill(os.getppid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class DyingWorker(SimpleHooklatchWorker):
    def execute_job(self, job, queue):
        if DIE_AT == "after_dequeue":
            die()
        return super().execute_job(job, queue)

    def perform_job(self, job, queue, execution):
        if DIE_AT == "before_started":
            die()
        return super().perform_job(job, queue, execution)

    def prepare_job_execution(self, job, remove_from_intermediate_queue=False):
        super().prepare_job_execution(job, remove_from_intermediate_queue)
        if DIE_AT == "after_started":
            die()


def main() -> None:
    logs.configure()  # as the hooklatch command does
    run_worker(build_runtime(Settings.from_env()), worker_class=DyingWorker)
    raise SystemExit("unreachable: the worker should have been killed taking its first job")


if __name__ == "__main__":
    main()
