"""deploy/compose.yaml as written: the services the Procfile names, in the order a
release needs, from one image, with no secret in the file; and podman-compose reads it.
test_compose.py runs it."""

from __future__ import annotations

import re
import subprocess

import pytest
import yaml

from tests.support.containers import podman_compose
from tests.support.install import ROOT

COMPOSE = ROOT / "deploy" / "compose.yaml"
HOOKLATCH = ("release", "web", "worker", "relay")


@pytest.fixture(scope="module")
def services():
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_the_services_are_the_databases_and_the_procfile(services):
    assert sorted(services) == sorted(("postgres", "redis", *HOOKLATCH))
    procfile = dict(
        line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if line
    )
    assert services["release"]["command"] == procfile["release"].split()
    assert services["worker"]["command"] == procfile["worker"].split()
    assert services["relay"]["command"] == procfile["relay"].split()
    assert "command" not in services["web"]  # the image's: gunicorn as a package starts it


def test_every_hooklatch_process_runs_the_one_image_read_only(services):
    for name in HOOKLATCH:
        service = services[name]
        assert service["image"] == "${HOOKLATCH_IMAGE:-hooklatch:latest}", name
        assert service["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}, name
        assert service["env_file"] == ".env", name
        assert service["read_only"] is True, name
        assert service["tmpfs"] == ["/tmp"], name


def test_web_worker_and_relay_wait_for_the_release_step_to_succeed(services):
    assert services["release"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert services["release"]["restart"] == "no"
    for name in ("web", "worker", "relay"):
        needs = services[name]["depends_on"]
        assert needs["release"] == {"condition": "service_completed_successfully"}, name
        assert needs["postgres"] == {"condition": "service_healthy"}, name
    for name in ("worker", "relay"):
        assert services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}


def test_each_long_running_service_says_how_it_is_healthy(services):
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    assert services["redis"]["healthcheck"]["test"][-1] == "ping"
    assert "/livez" in services["web"]["healthcheck"]["test"][-1]
    # A worker and a relay serve no HTTP: the image's /livez check would fail on them.
    for name in ("release", "worker", "relay"):
        assert services[name]["healthcheck"] == {"disable": True}, name


def test_a_stopping_worker_is_given_longer_than_it_gives_its_work_horse(services):
    from hooklatch.settings import Settings

    grace = services["worker"]["stop_grace_period"]
    assert int(grace.removesuffix("s")) > Settings.worker_stop_seconds


def test_no_secret_is_written_in_the_file(services):
    """Every value that could be a secret comes from deploy/.env, which git ignores."""
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            credentials = re.search(r"://[^/]*@", str(value))  # user:password@host
            if re.search(r"PASSWORD|SECRET|TOKEN|KEY", key) or credentials:
                assert "${" in str(value), (name, key)
    done = subprocess.run(
        ["git", "check-ignore", "-q", "deploy/.env"], cwd=ROOT, capture_output=True
    )
    assert done.returncode == 0, "deploy/.env must be ignored by git"
    example = (ROOT / "deploy" / "env.example").read_text()
    filled = [
        line
        for line in example.splitlines()
        if re.match(r"(POSTGRES_PASSWORD|HOOKLATCH_SECRET_KEYS|HOOKLATCH_\w*TOKEN)=.", line)
    ]
    assert filled == []


def compose_config(folder, env_file: str) -> subprocess.CompletedProcess[str]:
    """`podman-compose config` on a copy of the file, beside an .env holding ``env_file``."""
    (folder / "compose.yaml").write_text(COMPOSE.read_text())
    (folder / ".env").write_text(env_file)
    return subprocess.run(
        [podman_compose(), "-f", str(folder / "compose.yaml"), "config"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_podman_compose_reads_the_file(tmp_path):
    """`config` resolves the file as `up` would: interpolation, the env file, the anchors."""
    done = compose_config(tmp_path, "POSTGRES_PASSWORD=0123abcd\n")
    assert done.returncode == 0, done.stderr
    resolved = yaml.safe_load(done.stdout)["services"]
    url = resolved["worker"]["environment"]["DATABASE_URL"]
    assert url == "postgresql://hooklatch:0123abcd@postgres:5432/hooklatch"
    assert resolved["postgres"]["environment"]["POSTGRES_PASSWORD"] == "0123abcd"


def test_podman_compose_refuses_to_start_without_the_database_password(tmp_path):
    done = compose_config(tmp_path, "HOOKLATCH_PUBLIC_URL=https://hooks.example.test\n")
    assert done.returncode != 0
    assert "set POSTGRES_PASSWORD in deploy/.env" in done.stdout + done.stderr
