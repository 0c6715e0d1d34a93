"""The work horse: one long-lived child process that runs jobs for `hooklatch worker`.

RQ's default worker forks a horse for every job. That isolates a handler that crashes
its process, but a job then pays a fork, two new PostgreSQL connections (each a new
server backend), the SQL compilation of every statement and the process's exit, about
90 ms on two busy cores, whatever its size: at a steady trickle, with a job of a few
events each time a worker frees up, the workers spent more on jobs than on events.

Here one horse, forked from the worker, runs RQ's in-process worker for many jobs, with
its connections and compiled statements kept from one job to the next. The worker only
watches it: a horse that dies (a handler that crashed it, the kernel's OOM killer) is
replaced, and its job is recovered like any job whose process died (its lease goes with
its connection, and the relay's sweep hands its events out again). A horse is replaced
after ``HOOKLATCH_WORKER_MAX_JOBS`` jobs, so that what a handler leaks is given back.

On SIGTERM the worker passes the signal on: the horse finishes the chunk of events under
way, hands the rest of its job back and exits. One still at work
``HOOKLATCH_WORKER_STOP_SECONDS`` later is killed with its process group, and its job is
recorded as stopped, so that its events are handed out again without counting a lost
dispatch against them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import mmap
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass

from redis import Redis
from rq.job import Job, JobStatus

from hooklatch.workers.relay.sinks import SERIALIZER

log = logging.getLogger(__name__)

# How a horse's run ended, as it reports it to the worker (or as the worker finds it).
STOPPED = "stopped"  # asked to stop, or stopped by RQ on request
RECYCLED = "recycled"  # ran its share of jobs
DONE = "done"  # a burst run found the queue empty
REDIS = "redis"  # Redis was unreachable
QUIT = "quit"  # RQ's loop returned on its own (it logged why)
DIED = "died"  # the process ended without a report: killed, or crashed

PR_SET_PDEATHSIG = 1
JOB_ID_BYTES = 256


@dataclass(frozen=True)
class Outcome:
    kind: str
    worked: bool = False
    jobs: int = 0
    error: str = ""


class Horse:
    """Forks horses one after the other, each running ``work`` to its end."""

    def __init__(self, redis: Redis, stopping: threading.Event, stop_seconds: float) -> None:
        self.redis = redis
        self.stopping = stopping
        self.stop_seconds = stop_seconds
        # The id of the job the horse runs, written by the horse, read here to record a
        # job that a stop cut short. Shared memory: no Redis round trip, no RQ internals.
        self._job = mmap.mmap(-1, JOB_ID_BYTES)
        # Set by the first horse that says the worker listens: later horses start quietly.
        self._listening = mmap.mmap(-1, 1)

    def note_job(self, job_id: str | None) -> None:
        """In the horse: the job it runs now (None: none)."""
        data = (job_id or "").encode()[: JOB_ID_BYTES - 1]
        self._job[:] = data + b"\0" * (JOB_ID_BYTES - len(data))

    @property
    def listening_said(self) -> bool:
        return self._listening[0] == 1

    def note_listening_said(self) -> None:
        self._listening[0] = 1

    def run(self, work: Callable[[], Outcome]) -> Outcome:
        """Fork a horse that runs ``work`` and reports its outcome; wait for it to end."""
        self.note_job(None)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the horse's side; its effects are tested
            os.close(read_end)
            _horse_main(work, write_end)
        os.close(write_end)
        ended = threading.Event()
        watcher = threading.Thread(
            target=self._pass_stop_on, args=(pid, ended), name="hooklatch-horse", daemon=True
        )
        watcher.start()
        try:
            _, status = os.waitpid(pid, 0)
        finally:
            ended.set()
        watcher.join()
        with os.fdopen(read_end, "rb") as reader:
            report = reader.read()
        if report:
            return Outcome(**json.loads(report))
        return Outcome(DIED, error=_describe(status))

    def _pass_stop_on(self, pid: int, ended: threading.Event) -> None:
        """Once the worker is asked to stop, ask the horse, once (a second SIGTERM would
        make RQ stop at once, in the middle of a chunk); kill it if it still works
        ``stop_seconds`` later. A thread, not the signal handler: the handler only sets
        ``stopping``, whenever it comes, before the fork or after."""
        while not self.stopping.wait(0.1):
            if ended.is_set():
                return
        if ended.is_set():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not ended.wait(self.stop_seconds):
            self._cut_short(pid)

    def _cut_short(self, pid: int) -> None:
        """The horse still works ``stop_seconds`` after the stop: its chunk rolls back."""
        log.warning("the job's chunk is still running: stopping its work horse now")
        job_id = bytes(self._job).split(b"\0", 1)[0].decode()
        if job_id:
            # Before the kill, so that a worker exiting right after it has recorded it.
            with contextlib.suppress(Exception):  # the job may be gone: nothing to record
                Job.fetch(job_id, connection=self.redis, serializer=SERIALIZER).set_status(
                    JobStatus.STOPPED
                )
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)  # the horse leads its own group


def _horse_main(work: Callable[[], Outcome], report_to: int) -> None:  # pragma: no cover
    """The horse's life: its own process group (so that it can be killed with whatever a
    handler started), a SIGTERM if the worker dies, one run of ``work``, a report."""
    code = 0
    try:
        os.setpgrp()
        _die_with_parent()
        outcome = work()
        os.write(report_to, json.dumps(asdict(outcome)).encode())
    except BaseException:
        log.exception("the work horse failed")
        code = 1
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
        os._exit(code)


def _die_with_parent() -> None:
    """On Linux, the horse gets a SIGTERM when the worker that forked it dies, and stops
    as it would on the worker's own: no horse outlives its worker, taking jobs unwatched."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
