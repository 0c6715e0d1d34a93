"""Real processes under test: gunicorn, relays and workers, each in its own process group."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis as redis_lib

from bench.procs import unanswered
from hooklatch.settings import Settings
from tests.support.database import count
from tests.support.install import ROOT
from tests.support.pipeline import deliver, make_endpoint, wait_for


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment a hooklatch process needs for ``settings``, and nothing inherited
    that would configure it otherwise: a metrics directory of the test process (set there
    by running gunicorn.conf.py in-process) would be emptied by a gunicorn started on it,
    under the test process's own counts."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOOKLATCH_", "DATABASE_", "REDIS_", "PROMETHEUS_MULTIPROC_DIR"))
    }
    env.update(
        DATABASE_URL=settings.database_url or "",
        HOOKLATCH_SECRET_KEYS=",".join(settings.secret_keys),
        HOOKLATCH_ADMIN_TOKEN=settings.admin_token or "",
        HOOKLATCH_QUEUE=settings.queue_name,
        HOOKLATCH_HANDLERS="tests.support.handlers",
        HOOKLATCH_RETRY_BASE_SECONDS=str(settings.retry_base_seconds),
        HOOKLATCH_RETRY_MAX_SECONDS=str(settings.retry_max_seconds),
        HOOKLATCH_DISPATCH_GRACE_SECONDS=str(settings.dispatch_grace_seconds),
        HOOKLATCH_SWEEP_INTERVAL_SECONDS=str(settings.sweep_interval_seconds),
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
    )
    if settings.redis_url:
        env["REDIS_URL"] = settings.redis_url
    env.update(extra)
    return env


class Proc:
    def __init__(self, args: list[str], env: dict[str, str], log_path: Path, cwd: Path = ROOT):
        self.log_path = log_path
        self._log = open(log_path, "ab")  # noqa: SIM115
        self.popen = subprocess.Popen(
            args,
            env=env,
            cwd=cwd,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
        self.popen.wait(timeout=30)

    def stops_on_sigterm(self, timeout: float = 15.0) -> None:
        """SIGTERM: the process exits 0 within ``timeout``."""
        self.popen.send_signal(signal.SIGTERM)
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"running {timeout} s after SIGTERM:\n{self.log()}") from None
        assert code == 0, self.log()

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                self.kill()
        self._log.close()


def hooklatch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hooklatch", *args]


def wait_http(url: str, proc: Proc, timeout: float = 20.0) -> None:
    why = unanswered(url, proc.popen, timeout)
    assert why is None, f"the process {why} before answering {url}:\n{proc.log()}"


def start_gunicorn(
    procs: Any, settings: Settings, *, workers: int = 2, **env_extra: str
) -> tuple[str, Proc]:
    """gunicorn as the Procfile runs it, on a free port; returns its base URL."""
    port = free_port()
    env = process_env(settings, **env_extra)
    args = [
        sys.executable,
        "-m",
        "gunicorn",
        "wsgi:app",
        "-c",
        "gunicorn.conf.py",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--worker-class",
        "sync",
    ]
    proc = procs("gunicorn", args, env)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", proc)
    return base, proc


def start_redis(procs: Any, port: int, directory: Path, *options: str) -> Proc:
    """A redis-server of the test's own on ``port``, answering when this returns."""
    proc = procs(
        "redis-server",
        [
            "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--dir",
            str(directory),
            *options,
        ],
        {"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    client = redis_lib.Redis(host="127.0.0.1", port=port, socket_timeout=1)

    def up() -> bool:
        if proc.popen.poll() is not None:
            raise AssertionError(f"redis-server exited:\n{proc.log()}")
        try:
            return bool(client.ping())
        except redis_lib.ConnectionError:
            return False

    wait_for(up, timeout=10, message=f"redis-server on port {port}")
    client.close()
    return proc


def with_port(url: str, port: int) -> str:
    """``url`` with its port replaced (user name kept)."""
    parts = urlsplit(url)
    netloc = (
        f"{parts.username}@{parts.hostname}:{port}"
        if parts.username
        else f"{parts.hostname}:{port}"
    )
    return urlunsplit(parts._replace(netloc=netloc))


def procfile_command(kind: str) -> list[str]:
    """The Procfile's command for ``kind`` (web, worker, relay), as a process manager runs it."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == kind:
            return shlex.split(command)
    raise AssertionError(f"the Procfile has no {kind} process")


def on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this interpreter's scripts first on PATH, as a deployment has them."""
    return {**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"}


def start_procfile_web(procs: Any, settings: Settings, **env_extra: str) -> tuple[str, int, Proc]:
    """The Procfile's web command as a process manager runs it, on a free port, answering;
    returns its base URL, port and process."""
    port = free_port()
    env = on_path(process_env(settings, HOST="127.0.0.1", PORT=str(port), **env_extra))
    web = procs("web", procfile_command("web"), env)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", web)
    return base, port, web


def worker_runs_an_event(client: Any, runtime: Any, worker: Proc, event_id: str) -> None:
    """An effect event delivered to a new endpoint: the real ``worker`` (a relay running
    beside it) writes its effect within 30 s."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=["whsec_test_secret"])
    deliver(client, endpoint, event_id, "effect.waited")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM test_effects") == 1,
        timeout=30,
        message=f"the event processed by the worker that waited\n{worker.log()}",
    )


def listening(worker: Proc) -> bool:
    """`hooklatch worker` has started and takes jobs (its own start-up line)."""
    return "worker listening on queue" in worker.log()


# Lines RQ and gunicorn print at start (and stop) at their INFO level.
CHATTER = (
    "started with PID",
    "subscribing to channel",
    "*** Listening on",
    "cleaning registries",
    "Starting gunicorn",
    "Booting worker",
    "Using worker",
    "Control socket",
    "Listening at:",
    "setup plugin",
    "Running upgrade",
)


def chatter(text: str) -> list[str]:
    """The lines of a log that a library printed at its INFO level."""
    return [line for line in text.splitlines() if any(c in line for c in CHATTER)]


def retry_waits(log: str, says: str, times: int) -> list[float]:
    """The waits a process announced in its lines saying ``says``, checked to be what an
    operator should see while a service is away: at least ``times`` such lines, every line
    of the log a record of its own (no traceback, no continuation lines), and waits that
    grow."""
    assert "Traceback" not in log, log
    assert all(re.match(r"\d{4}-\d\d-\d\d ", line) for line in log.splitlines()), log
    lines = [line for line in log.splitlines() if says in line]
    assert len(lines) >= times, log
    waits = [float(found[-1]) for line in lines if (found := re.findall(r" in ([\d.]+) s", line))]
    assert len(waits) == len(lines), log
    assert waits == sorted(waits) and waits[-1] > waits[0], waits
    return waits


def work_horse(worker: Proc, timeout: float = 30.0) -> int:
    """The process id of `hooklatch worker`'s work horse (its forked child), once it has
    one."""
    path = Path(f"/proc/{worker.popen.pid}/task/{worker.popen.pid}/children")
    found: list[int] = []

    def forked() -> bool:
        if worker.popen.poll() is not None:
            raise AssertionError(f"the worker exited:\n{worker.log()}")
        found[:] = [int(pid) for pid in path.read_text().split()]
        return len(found) == 1

    wait_for(forked, timeout=timeout, message="the worker's work horse", explain=worker.log)
    return found[0]
