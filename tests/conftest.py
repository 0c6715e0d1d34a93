"""Fixtures: a fresh PostgreSQL database per test session, real Redis, real processes.

Nothing here mocks PostgreSQL or Redis; if either does not answer, the tests
error (they are never skipped). What test modules import lives in tests/support/.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from urllib.parse import urlsplit

import pytest
import redis as redis_lib
from alembic import command
from cryptography.fernet import Fernet
from sqlalchemy import text

from hooklatch import create_app
from hooklatch.db import make_engine as create_engine
from hooklatch.handlers import Router
from hooklatch.migrations import alembic_config
from hooklatch.settings import Settings
from tests.support.database import REDIS, TABLES, fresh_database
from tests.support.effects import metadata as effects_metadata
from tests.support.fake_github import FakeGitHub
from tests.support.install import ROOT, modules_not_installed
from tests.support.openapi import Described, DescribedClient
from tests.support.processes import Proc
from tests.support.tokens import ADMIN_TOKEN, AUTH, GITHUB_TOKEN

# The conformance kit's tests of the built-in providers (tests/unit/providers/), as a
# plugin author enables them.
pytest_plugins = ["hooklatch.testing.plugin"]


def pytest_configure(config):
    """A module added since the last editable install is not linked under hooklatch, and
    its tests would fail with a misleading ImportError: say what to run instead."""
    missing = modules_not_installed()
    if missing:
        pytest.exit(
            f"the installed hooklatch lacks {', '.join(missing[:3])}: run `make install-dev`",
            returncode=4,
        )


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
        admin_token=ADMIN_TOKEN,
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
def app_with(settings, router):
    """Apps on ``settings`` with some fields changed; each disposed of at the end."""
    made = []

    def make(**changes):
        app = create_app(replace(settings, **changes), router=router)
        made.append(app)
        return app

    yield make
    for app in made:
        app.extensions["hooklatch"].dispose()


@pytest.fixture
def runtime(app):
    return app.extensions["hooklatch"]


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def described():
    """The admin API's description, noting which answers were checked against it."""
    return Described()


@pytest.fixture
def api(client, described):
    """The test client with the admin token, each answer checked against the description."""
    return DescribedClient(client, described, AUTH)


@pytest.fixture
def github(client):
    """FakeGitHub taking GITHUB_TOKEN, delivering into the app's ingest view through the
    test client."""

    def send(url, headers, body):
        return client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code

    with FakeGitHub(send=send) as fake:
        fake.add_token(GITHUB_TOKEN)
        yield fake


@pytest.fixture
def client_at(settings, router):
    """Makes a test client, and its runtime, of an app whose clock stands at ``now``."""
    apps = []

    def make(now):
        app = create_app(settings, router=router, clock=lambda: now)
        apps.append(app)
        return app.test_client(), app.extensions["hooklatch"]

    yield make
    for app in apps:
        app.extensions["hooklatch"].dispose()


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


@pytest.fixture
def metrics_dir(tmp_path):
    """An empty folder for PROMETHEUS_MULTIPROC_DIR."""
    directory = tmp_path / "metrics"
    directory.mkdir()
    return directory


@pytest.fixture
def proc_settings(settings):
    """Settings for tests whose relay and workers are real processes."""
    return replace(settings, sweep_interval_seconds=0.5, dispatch_grace_seconds=1.0)
