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

RQ's forking worker also killed a horse whose job outlived its timeout; RQ's in-process
worker only raises an exception in the job once, which a handler may swallow or never
see (blocked in C). So the worker watches the clock too: a job still running
``overrun_seconds(timeout)`` past its timeout has its horse killed, and its events go out
again as any lost dispatch's do (it counts against them).

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
import select
import signal
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq.job import Job, JobStatus

from hooklatch.jobs import SERIALIZER
from hooklatch.operations.heartbeats import BEATING

log = logging.getLogger(__name__)

# How a horse's run ended, as it reports it to the worker (or as the worker finds it).
STOPPED = "stopped"  # asked to stop, or stopped by RQ on request
RECYCLED = "recycled"  # ran its share of jobs
DONE = "done"  # a burst run found the queue empty
REDIS = "redis"  # Redis was unreachable
QUIT = "quit"  # RQ's loop returned on its own (it logged why)
DIED = "died"  # the process ended without a report: killed, or crashed

PR_SET_PDEATHSIG = 1
# glibc's mallopt parameter, and the threshold it starts from (docs/architecture.md,
# "What a work horse holds").
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024
JOB_ID_BYTES = 256
# After the job's id: when it started (CLOCK_MONOTONIC, the same for both processes on
# Linux) and its timeout, in seconds; a timeout of 0 means no job runs.
_CLOCK = struct.Struct("dd")
# Recording a job cut short: a Redis that does not answer within this long is left alone.
RECORD_TIMEOUT_SECONDS = 1.0


def overrun_seconds(timeout: float) -> float:
    """How long past its timeout a job may run before its horse is killed: time for RQ's
    own timeout exception to end it first."""
    return min(60.0, max(5.0, timeout / 10))


@dataclass(frozen=True)
class Outcome:
    kind: str
    worked: bool = False
    jobs: int = 0
    error: str = ""


class HorseForker:
    """Forks horses one after the other, each running ``work`` to its end, and watches
    each one: a stop passed on, a job that overran its timeout, a horse that died."""

    def __init__(self, redis_url: str, stopping: threading.Event, stop_seconds: float) -> None:
        # Only to record a job cut short: a Redis that does not answer at once is left
        # alone, so that a stop stays bounded.
        self.redis = Redis.from_url(
            redis_url,
            socket_timeout=RECORD_TIMEOUT_SECONDS,
            socket_connect_timeout=RECORD_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        self.stopping = stopping
        self.stop_seconds = stop_seconds
        # The id of the job the horse runs, when it started and its timeout, written by the
        # horse, read here to record a job that a stop cut short and to kill a horse whose
        # job overran. Shared memory: no Redis round trip, no RQ internals.
        self._job = mmap.mmap(-1, JOB_ID_BYTES + _CLOCK.size)
        # Set by the first horse that says the worker listens: later horses start quietly.
        self._listening = mmap.mmap(-1, 1)

    def note_job(self, job_id: str | None, timeout: float | None = None) -> None:
        """In the horse: the job it runs now (None: none), and its timeout in seconds."""
        data = (job_id or "").encode()[: JOB_ID_BYTES - 1]
        clock = _CLOCK.pack(time.monotonic(), float(timeout or 0) if job_id else 0.0)
        self._job[:] = data + b"\0" * (JOB_ID_BYTES - len(data)) + clock

    def _running(self) -> tuple[str, float, float]:
        """The job the horse runs: its id, when it started and its timeout (0: none)."""
        raw = bytes(self._job)
        started, timeout = _CLOCK.unpack(raw[JOB_ID_BYTES:])
        return raw[:JOB_ID_BYTES].split(b"\0", 1)[0].decode(errors="replace"), started, timeout

    @property
    def listening_said(self) -> bool:
        return self._listening[0] == 1

    def note_listening_said(self) -> None:
        self._listening[0] = 1

    def run(self, work: Callable[[], Outcome]) -> Outcome:
        """Fork a horse that runs ``work`` and reports its outcome; wait for it to end."""
        self.note_job(None)
        parent = os.getpid()
        read_end, write_end = os.pipe()
        try:
            with BEATING:  # never in the middle of the heartbeat's database work
                pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:  # pragma: no cover - the horse's side; its effects are tested
            os.close(read_end)
            _horse_main(work, write_end, parent)
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
        report = _read_report(read_end)
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
            if self._overran(pid):
                return
        if ended.is_set():
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if not ended.wait(self.stop_seconds):
            self._cut_short(pid)

    def _overran(self, pid: int) -> bool:
        """Kill the horse if its job has run ``overrun_seconds`` past its timeout."""
        job_id, started, timeout = self._running()
        if not job_id or timeout <= 0:
            return False
        ran = time.monotonic() - started
        if ran <= timeout + overrun_seconds(timeout):
            return False
        log.error(
            "job %s has run %.0f s, past its %.0f s timeout: stopping its work horse; its "
            "events go out again",
            job_id,
            ran,
            timeout,
        )
        _kill(pid)
        return True

    def _cut_short(self, pid: int) -> None:
        """The horse still works ``stop_seconds`` after the stop: its chunk rolls back. The
        kill comes first, so that the stop stays bounded whatever Redis does; the job is
        then recorded as stopped (its events go out again without a lost dispatch counted
        against them), if Redis answers at once."""
        log.warning("the job's chunk is still running: stopping its work horse now")
        job_id, _, _ = self._running()
        _kill(pid)
        if not job_id:
            return
        try:
            Job.fetch(job_id, connection=self.redis, serializer=SERIALIZER).set_status(
                JobStatus.STOPPED
            )
        except Exception as exc:  # gone, or Redis away: the sweep finds it lost instead
            log.warning("job %s not recorded as stopped: %s", job_id, type(exc).__name__)


def _kill(pid: int) -> None:
    """The horse and whatever its handlers started (it leads its own group)."""
    for kill in (os.killpg, os.kill):  # os.kill: a horse not yet leading its group
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


def _read_report(read_end: int) -> bytes:
    """What the horse wrote before it ended. Without waiting for the pipe's end: a
    process a handler forked may hold its write end open long after the horse is gone."""
    chunks = []
    try:
        os.set_blocking(read_end, False)
        while select.select([read_end], [], [], 0)[0]:
            try:
                chunk = os.read(read_end, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
    return b"".join(chunks)


def _horse_main(
    work: Callable[[], Outcome], report_to: int, parent: int
) -> None:  # pragma: no cover
    """The horse's life: its own process group (so that it can be killed with whatever a
    handler started), a SIGTERM if the worker dies, one run of ``work``, a report."""
    code = 0
    try:
        os.setpgrp()
        _die_with_parent(parent)
        _fix_mmap_threshold()
        outcome = work()
        os.write(report_to, json.dumps(asdict(outcome)).encode())
    except BaseException:
        log.exception("the work horse failed")
        code = 1
    finally:
        with contextlib.suppress(Exception):
            logging.shutdown()
        for stream in (sys.stdout, sys.stderr):  # a handler's prints: os._exit drops them
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _die_with_parent(parent: int) -> None:
    """On Linux, the horse gets a SIGTERM when the worker that forked it dies, and stops
    as it would on the worker's own: no horse outlives its worker, taking jobs unwatched."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the worker died before the prctl: stop now
        os.kill(os.getpid(), signal.SIGTERM)


def _fix_mmap_threshold() -> None:
    """Keep glibc's mmap threshold where it starts, unless the environment sets it.

    Left alone, glibc raises the threshold to the size of each large block freed (up to
    32 MiB), and later blocks below it come from the heap, which fragments and keeps them
    once freed: a horse that ran 25 MB bodies peaked 46 MiB higher, and kept more after.
    Fixed, every block of 128 KiB or more is mapped on its own and given back when freed.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in os.environ.get(
        "GLIBC_TUNABLES", ""
    ):
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to fix
        ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(number).name}"
        return f"killed by signal {number}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"
