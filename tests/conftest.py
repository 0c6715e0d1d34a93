"""Fixtures: a fresh PostgreSQL database per test session, real Redis, real processes.

Nothing here mocks PostgreSQL or Redis; if either does not answer, the tests
error (they are never skipped).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import psycopg2
import pytest
import redis as redis_lib
import requests
from alembic import command
from cryptography.fernet import Fernet
from rq import SimpleWorker
from sqlalchemy import text

from hooklatch import create_app
from hooklatch.db import make_engine as create_engine
from hooklatch.endpoints.service import create_endpoint
from hooklatch.handlers import Router
from hooklatch.migrations import alembic_config
from hooklatch.settings import Settings
from tests.support.effects import metadata as effects_metadata

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("HOOKLATCH_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("HOOKLATCH_TEST_REDIS", "redis://127.0.0.1:6379/0")
TABLES = (
    "attempts",
    "outbox",
    "replays",
    "events",
    "endpoint_secrets",
    "refusals",
    "endpoints",
    "test_effects",
)


def pytest_configure(config):
    """The editable install (setuptools' strict mode) links each module of app/, workers/ and
    migrations/ under the name hooklatch; one added since the last install is not there
    until the install runs again, and its tests would fail with a misleading ImportError."""
    missing = modules_not_installed()
    if missing:
        pytest.exit(
            f"the installed hooklatch lacks {', '.join(missing[:3])}: run `make install-dev`",
            returncode=4,
        )


def modules_not_installed() -> list[str]:
    import importlib.util

    missing = []
    for folder, package in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            name = ".".join((package, *parts)).removesuffix(".__init__")
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None or Path(spec.origin).resolve() != path:
                missing.append(name)
    return missing


# Where each part of the one import package lives in the repository (pyproject.toml).
PACKAGE_DIRS = {
    "app": "hooklatch",
    "workers": "hooklatch.workers",
    "migrations": "hooklatch.migrations",
}


def _admin_exec(sql: str) -> None:
    connection = psycopg2.connect(PG_ADMIN)
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute(sql)
    connection.close()


@contextmanager
def fresh_database(prefix: str = "hooklatch_test"):
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    _admin_exec(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    try:
        yield url
    finally:
        _admin_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url():
    with fresh_database() as url:
        command.upgrade(alembic_config(url), "head")
        engine = create_engine(url)
        effects_metadata.create_all(engine)
        engine.dispose()
        yield url


@pytest.fixture(scope="session")
def redis_url():
    redis_lib.Redis.from_url(REDIS).ping()
    return REDIS


@pytest.fixture
def queue_name():
    return f"hooklatch-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def secret_key():
    return Fernet.generate_key().decode()


@pytest.fixture
def clean_db(pg_url):
    engine = create_engine(pg_url)
    with engine.begin() as connection:
        connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture
def settings(pg_url, redis_url, secret_key, queue_name, tmp_path, clean_db):
    return Settings(
        database_url=pg_url,
        redis_url=redis_url,
        secret_keys=(secret_key,),
        admin_token="test-admin-token",
        public_url="http://hooks.example.test",
        instance_path=tmp_path / "instance",
        queue_name=queue_name,
        retry_base_seconds=0.05,
        retry_max_seconds=0.2,
        dispatch_grace_seconds=0.0,
        sweep_interval_seconds=0.2,
        relay_poll_seconds=0.2,
        start_dispatcher=False,
    ).validated()


@pytest.fixture
def router():
    from tests.support import handlers  # noqa: F401  (the module's own routes are not used)

    return Router()


@pytest.fixture
def app(settings, router):
    app = create_app(settings, router=router)
    yield app
    app.extensions["hooklatch"].dispose()


@pytest.fixture
def runtime(app):
    return app.extensions["hooklatch"]


@pytest.fixture
def client(app):
    return app.test_client()


def make_endpoint(
    runtime, provider="stripe", *, name=None, secrets=("whsec_test_secret",), options=None
):
    with runtime.session_factory.begin() as session:
        endpoint, plain = create_endpoint(
            session,
            provider=runtime.provider(provider),
            name=name or f"{provider}-{uuid.uuid4().hex[:6]}",
            secrets=list(secrets),
            box=runtime.box,
            options=options,
        )
        return endpoint.id, plain


def deliver(client, endpoint, event_id, event_type="invoice.paid", secret="whsec_test_secret"):
    """POST one Stripe-signed event through the real view; returns its stored id."""
    from tests.support.signing import stripe_event, stripe_headers

    body = stripe_event(event_id, event_type=event_type)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret))
    assert response.status_code == 200, response.json
    return response.json["events"][0]["id"]


def wait_drained(runtime, queue, *, timeout: float = 20) -> None:
    """Every outbox row relayed and every queued or running job finished."""
    from rq.registry import StartedJobRegistry

    wait_for(
        lambda: (
            count(runtime, "SELECT count(*) FROM outbox") == 0
            and queue.count == 0
            and StartedJobRegistry(queue=queue).count == 0
        ),
        timeout=timeout,
        message="outbox and queue drained",
    )


def count(runtime, sql: str, **params) -> int:
    with runtime.engine.connect() as connection:
        return connection.execute(text(sql), params).scalar_one()


def drain(runtime, *, timeout: float = 20.0, until=None) -> None:
    """Relay and work in this process until nothing is pending and due (or `until()`)."""
    from redis import Redis

    from hooklatch.workers.relay.loop import Relay
    from hooklatch.workers.relay.sinks import RQSink
    from hooklatch.workers.worker import jobs

    jobs.install(runtime)
    redis = Redis.from_url(runtime.settings.redis_url)
    relay = Relay(runtime, RQSink(runtime, redis))
    worker = SimpleWorker([runtime.settings.queue_name], connection=redis)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        relay.relay_once()
        relay.sweep_once()
        worker.work(burst=True, logging_level="WARNING")
        if until is not None and until():
            return
        pending = count(runtime, "SELECT count(*) FROM events WHERE status = 'pending'")
        replays = count(runtime, "SELECT count(*) FROM replays WHERE status = 'pending'")
        if until is None and pending == 0 and replays == 0:
            return
        time.sleep(0.05)
    raise AssertionError("work did not drain in time")


# -- real processes --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOOKLATCH_", "DATABASE_", "REDIS_"))
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
    def __init__(self, args, env, log_path: Path, cwd=ROOT):
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

    def kill(self, sig=signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)
        self.popen.wait(timeout=30)

    def stop(self) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                self.kill()
        self._log.close()


@pytest.fixture
def procs(tmp_path):
    """Start processes; all of them are stopped at the end of the test."""
    started: list[Proc] = []

    def start(name, args, env, cwd=ROOT):
        proc = Proc(args, env, tmp_path / f"{name}-{len(started)}.log", cwd=cwd)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def hooklatch_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "hooklatch", *args]


def wait_http(url: str, proc: Proc, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise AssertionError(f"process exited early:\n{proc.log()}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:  # not listening yet, or a worker still booting
            time.sleep(0.1)
    raise AssertionError(f"{url} did not answer:\n{proc.log()}")


def start_gunicorn(procs, settings, *, workers=2, **env_extra):
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


def wait_for(predicate, *, timeout: float, interval: float = 0.1, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return time.monotonic()
        time.sleep(interval)
    raise AssertionError(f"{message} not reached within {timeout} s")


@pytest.fixture
def proc_settings(settings):
    """Settings for tests whose relay and workers are real processes."""
    return replace(settings, sweep_interval_seconds=0.5, dispatch_grace_seconds=1.0)
