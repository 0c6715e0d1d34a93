"""deploy/Dockerfile built and deploy/compose.yaml run with podman (`make test-deploy`):
the release step first, then web, worker and relay from the same image, as user 10001,
a signed delivery processed by a handler, the web container's health check passing.

No image registry is reachable here: the image is built on a Debian base made by
mmdebstrap (tests/support/containers.py), and the compose file's postgres and redis
services, whose official images cannot be pulled, are stand-ins on the host's network
that are healthy when the host's PostgreSQL and Redis answer; the hooklatch services run
on the host's network too, pointed at them. Everything else runs as the file says.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import requests
import yaml
from cryptography.fernet import Fernet

from tests.support.containers import (
    IMAGE,
    base_image,
    build_image,
    containers,
    podman,
    podman_env,
    process_users,
    require,
)
from tests.support.database import REDIS, fresh_database
from tests.support.http import timed_delivery
from tests.support.install import ROOT
from tests.support.pipeline import wait_for
from tests.support.processes import free_port

COMPOSE = ROOT / "deploy" / "compose.yaml"
HOOKLATCH_SERVICES = ("release", "web", "worker", "relay")
SECRET = "whsec_deploy_test"
USER = "10001"
ADD_ENDPOINT = (
    *("hooklatch", "endpoints", "add", "stripe"),
    *("--name", "deployed", "--secret", "-", "--json"),
)
HANDLERS = """
import os

from sqlalchemy import text

from hooklatch import on


@on("*", "invoice.paid")
def record(event, ctx):
    ctx.session.execute(
        text("INSERT INTO deployed_effects (external_id, uid) VALUES (:external_id, :uid)"),
        {"external_id": event.external_id, "uid": os.getuid()},
    )
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    require("podman")
    require("runc")
    return podman_env(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def image(env, tmp_path_factory):
    base = base_image(env)
    seconds = build_image(env, base, tmp_path_factory.mktemp("build"))
    print(f"\nimage built in {seconds:.1f} s")
    return base


def on_the_host(base: str, database_url: str, handlers: Path, web_port: int) -> dict[str, Any]:
    """deploy/compose.yaml with postgres and redis standing in for the host's servers,
    and the hooklatch services on the host's network, pointed at them."""
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    for name, port in (("postgres", 5432), ("redis", 6379)):
        services[name] = {
            "image": base,
            "command": ["sleep", "infinity"],
            "network_mode": "host",
            "stop_signal": "SIGKILL",
            "healthcheck": {
                **services[name]["healthcheck"],
                "test": [
                    "CMD",
                    "python3",
                    "-c",
                    f"import socket; socket.create_connection(('127.0.0.1', {port}), 2)",
                ],
            },
        }
    for name in HOOKLATCH_SERVICES:
        service = services[name]
        service.pop("ports", None)
        service["network_mode"] = "host"
        service["environment"] = {"DATABASE_URL": database_url, "REDIS_URL": REDIS}
        # Where an image built on this one would COPY it: the working directory.
        service["volumes"] = [f"{handlers}:/srv/hooklatch/deployed_handlers.py:ro"]
    services["web"]["environment"].update(HOST="127.0.0.1", PORT=str(web_port))
    compose.pop("volumes", None)
    return compose


def compose_cmd(env: dict[str, str], project_dir: Path, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [
            require("podman-compose"),
            "-p",
            project_dir.name,
            "-f",
            str(project_dir / "compose.yaml"),
            *args,
        ],
        env=env,
        cwd=project_dir,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(f"podman-compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def container_log(env: dict[str, str], container: str) -> str:
    done = subprocess.run(["podman", "logs", container], env=env, capture_output=True, text=True)
    return done.stdout + done.stderr


def logs(env: dict[str, str], project: str) -> str:
    return "\n".join(
        f"--- {service}\n{container_log(env, container['Id'])[-3000:]}"
        for service, container in containers(env, project).items()
    )


def test_the_compose_stack_processes_a_signed_delivery_as_a_user_that_is_not_root(
    env, image, tmp_path
):
    require("podman-compose")
    project_dir = tmp_path / f"hooklatch-deploy-{uuid.uuid4().hex[:8]}"
    project_dir.mkdir()
    project = project_dir.name
    handlers = tmp_path / "deployed_handlers.py"
    handlers.write_text(HANDLERS)
    web_port = free_port()
    with fresh_database("hooklatch_deploy") as database_url:
        with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
            cursor.execute("CREATE TABLE deployed_effects (external_id text, uid int)")
        (project_dir / "compose.yaml").write_text(
            yaml.safe_dump(on_the_host(image, database_url, handlers, web_port))
        )
        (project_dir / ".env").write_text(
            f"HOOKLATCH_IMAGE={IMAGE}\n"
            "POSTGRES_PASSWORD=not-used-by-the-stand-in\n"
            f"HOOKLATCH_SECRET_KEYS={Fernet.generate_key().decode()}\n"
            "HOOKLATCH_PUBLIC_URL=https://hooks.example.test\n"
            "HOOKLATCH_HANDLERS=deployed_handlers\n"
            f"HOOKLATCH_QUEUE=deploy-{uuid.uuid4().hex[:8]}\n"
            "WEB_CONCURRENCY=2\n"
        )
        started = time.monotonic()
        try:
            # In the order depends_on gives (test_compose_file.py checks it), one step at
            # a time: podman-compose passes depends_on to podman as --requires, and
            # podman 4.3 (Debian 12's) then fails to start web, worker and relay ("container
            # ... depends on container ... not found in input list") once release has exited.
            compose_cmd(env, project_dir, "up", "-d", "--no-deps", "postgres", "redis")
            compose_cmd(env, project_dir, "up", "--no-deps", "release")
            compose_cmd(env, project_dir, "up", "-d", "--no-deps", "web", "worker", "relay")
            _check_the_stack(env, project, database_url, web_port, started)
        except BaseException:
            print(logs(env, project))
            raise
        finally:
            compose_cmd(env, project_dir, "down", "-v", "-t", "30", timeout=180)


def _check_the_stack(
    env: dict[str, str], project: str, database_url: str, web_port: int, started: float
) -> None:
    running = containers(env, project)
    release = running["release"]["State"]
    assert (release["Status"], release["ExitCode"]) == ("exited", 0)
    base = f"http://127.0.0.1:{web_port}"

    def web_answers() -> bool:
        try:
            return requests.get(base + "/livez", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    wait_for(web_answers, timeout=120, interval=0.5, message="web answering /livez")
    web = running["web"]["Id"]
    added = subprocess.run(
        ["podman", "exec", "-i", web, *ADD_ENDPOINT],
        input=SECRET,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    endpoint = json.loads(added.stdout)["id"]
    status, _ = timed_delivery(f"{base}/hooks/{endpoint}", "evt_deployed", SECRET)
    assert status == 200

    def handled() -> list[tuple[str, int]]:
        with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
            cursor.execute("SELECT external_id, uid FROM deployed_effects")
            return cursor.fetchall()

    processed_at = wait_for(handled, timeout=60, interval=0.5, message="the event handled")
    print(f"compose up to the first processed event: {processed_at - started:.1f} s")
    assert handled() == [("evt_deployed", int(USER))]  # run once, by the work horse, as 10001
    with psycopg2.connect(database_url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT status FROM events")
        assert cursor.fetchall() == [("processed",)]

    said = container_log(env, web)
    assert " ERROR " not in said and "Traceback" not in said, said

    # No systemd here to run health checks on their schedule: run the web's once.
    podman(env, "healthcheck", "run", web)
    assert containers(env, project)["web"]["State"]["Health"]["Status"] == "healthy"
    for service in ("web", "worker", "relay"):
        container = containers(env, project)[service]
        assert container["State"]["Status"] == "running", service
        assert container["Config"]["User"] == f"{USER}:{USER}"
        assert process_users(env, container["Id"]) == {USER}, service
