"""hooklatch as it is declared: the wheel installed into a fresh virtualenv from its own
metadata (no lock file), then the Procfile's four processes as a wheel's user starts
them, against a fresh database and Redis, with a signed delivery processed by a handler.

Twice: with the newest releases pyproject's ranges admit (pip, as a team that lists
hooklatch in its own requirements installs it), and with the lowest (uv's
``--resolution lowest-direct``), so that the floors are true.

It needs PyPI and takes minutes, so `pytest` does not collect it (its name does not
start with ``test_``): `make test-install` runs it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography.fernet import Fernet
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.database import REDIS, fresh_database
from tests.support.pipeline import wait_for
from tests.support.processes import free_port
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import ADMIN_TOKEN
from tests.support.wheel import build_wheel, metadata, requirements

# The user's handlers, in the folder every process starts in (HOOKLATCH_HANDLERS).
HANDLERS = '''"""Handlers of a project that installed hooklatch."""

import os
from pathlib import Path

from hooklatch import Context, EventView, on


@on("stripe", "invoice.paid")
def remember(event: EventView, ctx: Context) -> None:
    Path(os.environ["USER_EFFECTS"], event.external_id).write_text(ctx.idempotency_key)
'''
SECRET = "whsec_clean_install"
LIST_DISTRIBUTIONS = (
    "from importlib.metadata import distributions\n"
    "for d in distributions(): print(d.metadata['Name'], d.version)"
)
# How a wheel's user starts the web process: the repository's wsgi.py and
# gunicorn.conf.py are not in the wheel.
WEB = ["gunicorn", "hooklatch:create_app()", "-c", "python:hooklatch.gunicorn_config"]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="session")
def uv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """uv, from PyPI, in a virtualenv of its own."""
    tools = tmp_path_factory.mktemp("uv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(tools)], check=True, timeout=120)
    run([str(tools / "bin" / "pip"), "install", "--quiet", "uv"], timeout=300)
    return tools / "bin" / "uv"


def run(
    args: list[str],
    *,
    timeout: float,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}{done.stderr}"
    return done


def install_newest(venv: Path, wheel: Path, uv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)], timeout=600)


def install_lowest(venv: Path, wheel: Path, uv: Path) -> None:
    """Every requirement in the wheel's metadata at the lowest release its range admits
    (uv takes the lowest of direct requirements only: each is named here)."""
    run([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv)], timeout=120)
    python = str(venv / "bin" / "python")
    lowest = ["--resolution", "lowest-direct", str(wheel), *requirements(wheel)]
    run([str(uv), "pip", "install", "--quiet", "--python", python, *lowest], timeout=600)
    installed = installed_versions(venv)
    floors = {
        canonicalize_name(requirement.name): str(spec.version)
        for requirement in map(Requirement, requirements(wheel))
        for spec in requirement.specifier
        if spec.operator == ">="
    }
    # A floor below what another requirement asks for is not a version that can run.
    above = {
        name: f"{floor} -> {installed[name]}"
        for name, floor in floors.items()
        if Version(installed[name]) != Version(floor)
    }
    assert above == {}, f"floors that cannot be installed: {above}"


def installed_versions(venv: Path) -> dict[str, str]:
    listed = run([str(venv / "bin" / "python"), "-c", LIST_DISTRIBUTIONS], timeout=60).stdout
    return {
        canonicalize_name(name): version
        for name, version in (line.split() for line in listed.splitlines())
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "effects").mkdir(parents=True)
    (project / "shop_webhooks.py").write_text(HANDLERS)
    (project / "secret").write_text(SECRET + "\n")
    return project


@pytest.fixture
def database() -> Iterator[str]:
    with fresh_database("hooklatch_install") as url:
        yield url


def environment(venv: Path, project: Path, database: str, port: int) -> dict[str, str]:
    """One environment for every process, as a deployment gives them."""
    return {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(project),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": database,
        "REDIS_URL": REDIS,
        "HOOKLATCH_QUEUE": f"hooklatch-install-{port}",
        "HOOKLATCH_SECRET_KEYS": Fernet.generate_key().decode(),
        "HOOKLATCH_ADMIN_TOKEN": ADMIN_TOKEN,
        "HOOKLATCH_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "HOOKLATCH_HANDLERS": "shop_webhooks",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "USER_EFFECTS": str(project / "effects"),
    }


@pytest.mark.parametrize("install", [install_newest, install_lowest], ids=["newest", "lowest"])
def test_the_wheel_installed_from_its_metadata_runs_every_process(
    install, wheel, uv, project, database, procs, tmp_path
):
    venv = tmp_path / "venv"
    install(venv, wheel, uv)
    port = free_port()
    env = environment(venv, project, database, port)
    hooklatch = str(venv / "bin" / "hooklatch")

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return run([hooklatch, *args], env=env, cwd=project, timeout=120)

    command("db", "upgrade")  # the Procfile's release
    secret_file = str(project / "secret")
    added = command("endpoints", "add", "stripe", "--name", "shop", "--secret-file", secret_file)
    endpoint = added.stdout.split()[1]

    web = procs("web", [str(venv / "bin" / WEB[0]), *WEB[1:]], env, cwd=project)
    worker = procs("worker", [hooklatch, "worker"], env, cwd=project)
    relay = procs("relay", [hooklatch, "relay"], env, cwd=project)
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        for proc in (web, worker, relay):
            assert proc.popen.poll() is None, f"{proc.log_path.name} exited:\n{proc.log()}"
        try:
            return requests.get(f"{base}/readyz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    wait_for(ready, timeout=60, message="the web process ready", explain=web.log)
    body = stripe_event("evt_clean_install")
    answer = requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET), timeout=10
    )
    assert answer.status_code == 200, answer.text

    effect = project / "effects" / "evt_clean_install"

    def logs() -> str:
        return "\n".join(proc.log() for proc in (web, worker, relay))

    wait_for(effect.exists, timeout=60, message="the handler's effect", explain=logs)
    assert effect.read_text().startswith(f"hooklatch:{endpoint}")
    assert "gevent" in web.log(), web.log()  # the production worker class, not a fallback
    for proc in (web, worker, relay):
        proc.stop()
        assert "Traceback" not in proc.log(), proc.log()
    assert os.listdir(project / "effects") == ["evt_clean_install"]
    [version] = metadata(wheel)["Version"]
    assert command("--version").stdout.split() == ["hooklatch", version]
