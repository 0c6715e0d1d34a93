"""Processes the harness starts, and the database and Redis it uses: all cleaned up at exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg2
import redis as redis_lib
import requests

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


class BenchError(RuntimeError):
    """A scenario could not run or produced wrong results (lost, doubled or refused events)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A new, empty database for one run; dropped afterwards, whatever happened."""
    name = f"hooklatch_bench_{uuid.uuid4().hex[:8]}"
    _admin(admin_url, f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        _admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(admin_url: str, sql: str) -> None:
    connection = psycopg2.connect(admin_url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
    finally:
        connection.close()


def psql(url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    connection = psycopg2.connect(url)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall()) if cursor.description else []
    finally:
        connection.close()


def scalar(url: str, sql: str, params: tuple[Any, ...] = ()) -> Any:
    return psql(url, sql, params)[0][0]


def flush_redis(url: str) -> None:
    redis_lib.Redis.from_url(url).flushdb()


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the process group, then SIGKILL what is left."""
        if self.popen.poll() is None:
            _signal_group(self.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        _signal_group(self.pid, signal.SIGKILL)  # stray children (RQ work horses) too
        if self.popen.poll() is None:
            self.popen.wait(5)


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.killpg(pgid, sig)


@dataclass
class Procs:
    """Every process of a scenario; `stop_all` (or leaving the context) ends them."""

    log_dir: Path
    running: list[Proc] = field(default_factory=list)

    def start(self, name: str, args: list[str], env: dict[str, str]) -> Proc:
        log_path = self.log_dir / f"{name}.log"
        handle = log_path.open("ab")
        popen = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
        )
        handle.close()
        proc = Proc(name, popen, log_path)
        self.running.append(proc)
        return proc

    def stop(self, proc: Proc) -> None:
        proc.stop()
        self.running.remove(proc)

    def stop_all(self) -> None:
        for proc in reversed(self.running):
            proc.stop()
        self.running.clear()

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()

    def check_alive(self) -> None:
        for proc in self.running:
            if proc.popen.poll() is not None:
                raise BenchError(
                    f"{proc.name} exited ({proc.popen.returncode}):\n{proc.log_tail()}"
                )


def unanswered(url: str, popen: subprocess.Popen[bytes], timeout: float) -> str | None:
    """Polls ``url`` until it answers: None then; else why it did not, "exited" (the process
    ended first) or "timed out"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            return "exited"
        try:
            requests.get(url, timeout=1)
            return None
        except requests.RequestException:  # not listening yet, or a worker still booting
            time.sleep(0.1)
    return f"timed out after {timeout} s"


def wait_http(url: str, proc: Proc, timeout: float = 30) -> None:
    why = unanswered(url, proc.popen, timeout)
    if why is not None:
        raise BenchError(f"{proc.name} {why} before answering {url}:\n{proc.log_tail()}")


def wait_until(
    predicate: Callable[[], bool], *, timeout: float, what: str, interval: float = 0.2
) -> float:
    """Poll until predicate() is true; returns the seconds it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise BenchError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
    return time.monotonic() - started


def children(pid: int) -> list[int]:
    """The process ids of a process's children; none once it has gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(child) for child in handle.read().split()]
    except OSError:
        return []


def memory_mib(pid: int) -> dict[str, float]:
    """A live process's resident set now (VmRSS) and at its peak (VmHWM), in MiB."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                fields[name] = int(value.split()[0]) / 1024  # kB
    return {"rss": fields["VmRSS"], "peak": fields["VmHWM"]}


def _rss_mb(pid: int) -> float:
    """Peak resident set of a live process (VmHWM), in MiB."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class MemorySampler:
    """Samples the peak RSS of a process's children (gunicorn workers, RQ work horses)
    and of the process itself, every few hundred milliseconds, until stopped."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.roots: dict[str, int] = {}
        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def watch(self, role: str, pid: int) -> None:
        self.roots[role] = pid

    def start(self) -> MemorySampler:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._sample()
        self._stop.set()
        self._thread.join()
        return {role: round(mb, 1) for role, mb in self.peaks.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def _sample(self) -> None:
        for role, pid in list(self.roots.items()):
            self._peak(role, _rss_mb(pid))
            for child in children(pid):
                self._peak(f"{role} child", _rss_mb(child))

    def _peak(self, role: str, mb: float) -> None:
        if mb > self.peaks.get(role, 0.0):
            self.peaks[role] = mb


def cpu_seconds(pid: int) -> float:
    """CPU time a process and its children have used so far: its own, its live children's
    (gunicorn's workers) and what its ended children used (RQ work horses), in seconds."""
    tick = os.sysconf("SC_CLK_TCK")

    def times(one: int) -> tuple[int, int]:
        try:
            with open(f"/proc/{one}/stat") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            return 0, 0
        # utime, stime, cutime, cstime: fields 14 to 17, the 12th to 15th after the name.
        return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])

    own, ended = times(pid)
    live = sum(sum(times(child)) for child in children(pid))
    return (own + ended + live) / tick
