"""The built wheel installs one import package, `hooklatch`, and runs beside a user's own
`app`, `migrations` and `workers`: Flask's tutorial layout, with Flask-Migrate's folder."""

import re
import subprocess
import sys
import time
import zipfile

import pytest

from tests.support.install import ROOT
from tests.support.processes import free_port
from tests.support.wheel import build_log, build_wheel

APP = '''"""The user's own Flask application, as Flask's tutorial lays it out."""


def create_app():
    raise AssertionError("hooklatch imported the user's app package")
'''
WEBHOOKS = '''"""The user's handlers, registered through HOOKLATCH_HANDLERS=app.webhooks."""

import os
from pathlib import Path

from hooklatch import Context, EventView, on


@on("stripe", "*")
def remember(event: EventView, ctx: Context) -> None:
    Path(os.environ["USER_EFFECTS"], event.external_id).write_text(ctx.idempotency_key)
'''
ALEMBIC_ENV = 'raise AssertionError("hooklatch ran the user\'s own alembic env.py")\n'
WORKERS = 'raise AssertionError("hooklatch imported the user\'s workers module")\n'
SEND = re.compile(r"^\s+(\S*hooklatch send-test demo.*)$", re.MULTILINE)


def user_project(tmp_path):
    project = tmp_path / "project"
    (project / "app").mkdir(parents=True)
    (project / "app" / "__init__.py").write_text(APP)
    (project / "app" / "webhooks.py").write_text(WEBHOOKS)
    (project / "migrations" / "versions").mkdir(parents=True)
    (project / "migrations" / "env.py").write_text(ALEMBIC_ENV)
    (project / "migrations" / "alembic.ini").write_text("[alembic]\nscript_location = .\n")
    (project / "workers.py").write_text(WORKERS)
    (project / "effects").mkdir()
    return project


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.mark.slow
def test_the_wheel_builds_without_a_word(wheel):
    # setuptools warned about each data folder of git's files it could import (80 lines).
    assert build_log(wheel).read_text() == ""


@pytest.mark.slow
def test_the_wheel_holds_its_license_and_declares_it(wheel):
    with zipfile.ZipFile(wheel) as archive:
        [info] = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" in name}
        license_text = archive.read(f"{info}/licenses/LICENSE").decode()
        fields = archive.read(f"{info}/METADATA").decode().split("\n\n")[0].splitlines()
    assert license_text == (ROOT / "LICENSE").read_text()
    assert "License-Expression: Apache-2.0" in fields
    assert "License-File: LICENSE" in fields


@pytest.mark.slow
def test_the_wheel_holds_only_hooklatch_and_serves_beside_the_users_own_app(wheel, procs, tmp_path):
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist()}
    assert top_level == {"hooklatch", wheel.name.split("-py3")[0] + ".dist-info"}, top_level

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], check=True, timeout=600
    )
    [site] = (venv / "lib").glob("python3*/site-packages")
    installed = {path.name for path in site.iterdir()}
    assert not installed & {"app", "workers", "migrations"}, installed

    project = user_project(tmp_path)
    port = free_port()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "PYTHONPATH": str(project),
        "HOOKLATCH_HANDLERS": "app.webhooks",
        "USER_EFFECTS": str(project / "effects"),
    }
    serve = procs(
        "serve", [str(venv / "bin" / "hooklatch"), "serve", "--port", str(port)], env, cwd=project
    )
    deadline = time.monotonic() + 120
    while not (printed := SEND.search(serve.log())) and time.monotonic() < deadline:
        assert serve.popen.poll() is None, serve.log()
        time.sleep(0.2)
    assert printed, serve.log()

    sent = subprocess.run(
        [str(venv / "bin" / "hooklatch"), "send-test", "demo", "--url", f"http://127.0.0.1:{port}"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sent.returncode == 0, sent.stdout + sent.stderr + serve.log()
    assert re.search(r"event \d+: processed", sent.stdout), sent.stdout
    [effect] = (project / "effects").iterdir()  # the user's handler ran, once
    assert effect.read_text().startswith("hooklatch:ep_")
    assert "Traceback" not in serve.log()


# A project's own tests, beside an installed hooklatch that it does not test with.
PROJECT_TESTS = """
import os
import runpy
import sys


def test_pytest_imported_none_of_hooklatch():
    assert [name for name in sys.modules if name.split(".")[0] == "hooklatch"] == []


def test_hooklatchs_modules_run_through_runpy():
    settings = runpy.run_module("hooklatch.gunicorn_config")
    assert settings["__file__"].startswith(os.environ["PYTHONPATH"]), settings["__file__"]
"""


@pytest.mark.slow
def test_the_installed_wheel_adds_nothing_to_a_pytest_run_until_a_conftest_enables_it(
    wheel, tmp_path
):
    """pytest marks every module of a distribution that registers a pytest plugin for
    assertion rewriting, through a loader runpy cannot use: hooklatch registers none."""
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    subprocess.run([*install, "--target", str(site), str(wheel)], check=True, timeout=300)
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_project.py").write_text(PROJECT_TESTS)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(site),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
    }

    def pytest_run(*args):
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
        return subprocess.run(
            command, cwd=project, env=env, capture_output=True, text=True, timeout=120
        )

    alone = pytest_run()
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "2 passed" in alone.stdout, alone.stdout

    # Enabled, the plugin is all pytest loads of hooklatch before the tests: runpy still works.
    (project / "conftest.py").write_text('pytest_plugins = ["hooklatch.testing.plugin"]\n')
    enabled = pytest_run("-k", "runpy")
    assert enabled.returncode == 0, enabled.stdout + enabled.stderr
    assert "1 passed" in enabled.stdout, enabled.stdout
