"""deploy/Dockerfile built and deploy/compose.yaml run with podman (`make test-deploy`),
as the file is written: its services on the network compose makes for them, each
hooklatch service reaching PostgreSQL and Redis by their service names with the password
from .env, web published on 127.0.0.1 and reached there. The release step first, then
web, worker and relay from the same image, as user 10001; a signed delivery processed by
a handler module, the way docs/deploying-recipes.md says to add one; the health checks.

No image registry is reachable here, so three images are made, not pulled: the base
(Debian 12's Python 3.11, from Debian's packages by mmdebstrap), and in place of the
official postgres and redis images one with Debian's PostgreSQL and Redis that starts
them from the same settings (tests/deploy/services/). The file's `image:` of those two
services is the one line changed. Without systemd, podman runs no health check on its
own schedule, and podman 4.3 cannot start a container whose dependencies have exited:
the test runs the checks and starts the services in depends_on's order itself.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from cryptography.fernet import Fernet

from tests.support.containers import (
    base_image,
    build,
    build_image,
    containers,
    podman,
    podman_compose,
    podman_env,
    process_users,
    run_tag,
    services_image,
)
from tests.support.http import timed_delivery
from tests.support.install import ROOT
from tests.support.pipeline import wait_for
from tests.support.processes import free_port
from tests.support.tools import needed_tool

COMPOSE = ROOT / "deploy" / "compose.yaml"
RECIPES = ROOT / "docs" / "deploying-recipes.md"
SECRET = "whsec_deploy_test"
USER = "10001"
# As the compose file's user, over the container's socket; rows as tab-separated fields.
PSQL = ("psql", "-U", "hooklatch", "-d", "hooklatch", "-AtF", "\t", "-v", "ON_ERROR_STOP=1")
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
    needed_tool("podman", apt="podman")
    needed_tool("runc", apt="runc")
    return podman_env(tmp_path_factory.mktemp("podman"))


@pytest.fixture(scope="module")
def images(env, tmp_path_factory) -> Iterator[dict[str, str]]:
    """The image deploy/Dockerfile builds, one built on it with a handler module as the
    recipes page says, and the stand-in for PostgreSQL and Redis. The first two are this
    run's own: untagged at the end (their layers stay, cached for the next run)."""
    base = base_image(env)
    started = time.monotonic()
    services = services_image(env, base)
    print(f"\nPostgreSQL and Redis image ready in {time.monotonic() - started:.1f} s")
    image, handlers = run_tag("hooklatch"), run_tag("hooklatch-handlers")
    try:
        seconds = build_image(env, base, tmp_path_factory.mktemp("build"), image)
        print(f"image built in {seconds:.1f} s")
        with_handlers(env, image, handlers, tmp_path_factory.mktemp("handlers"))
        yield {"hooklatch": handlers, "services": services}
    finally:
        podman(env, "untag", image, check=False)
        podman(env, "untag", handlers, check=False)


def with_handlers(env: dict[str, str], image: str, tag: str, directory: Path) -> None:
    """The recipes page's Dockerfile for handlers, on ``image``, with HANDLERS as its module."""
    page = RECIPES.read_text().split("**Your handlers.**", 1)[1]
    recipe = page.split("```dockerfile\n", 1)[1].split("```", 1)[0]
    assert recipe.startswith("FROM hooklatch\n"), recipe
    (directory / "Containerfile").write_text(
        recipe.replace("FROM hooklatch\n", f"FROM {image}\n", 1).replace(
            "myhandlers", "deployed_handlers"
        )
    )
    (directory / "deployed_handlers.py").write_text(HANDLERS)
    build(env, directory, directory / "Containerfile", tag, {})


def as_written(services: str) -> dict[str, Any]:
    """deploy/compose.yaml with one change: the postgres and redis services' image."""
    compose = yaml.safe_load(COMPOSE.read_text())
    for name in ("postgres", "redis"):
        compose["services"][name]["image"] = services
    return compose


def dot_env(image: str, web_port: int) -> str:
    """deploy/env.example filled in as its comments ask, and the image and port chosen."""
    filled = {
        "POSTGRES_PASSWORD": secrets.token_hex(24),
        "HOOKLATCH_SECRET_KEYS": Fernet.generate_key().decode(),
        "HOOKLATCH_PUBLIC_URL": "https://hooks.example.test",
    }
    example = (ROOT / "deploy" / "env.example").read_text()
    for name, value in filled.items():
        example, found = re.subn(rf"^{name}=$", f"{name}={value}", example, flags=re.M)
        assert found == 1, name
    return f"{example}\nHOOKLATCH_IMAGE={image}\nHOOKLATCH_WEB_PORT={web_port}\nWEB_CONCURRENCY=2\n"


def compose_cmd(env: dict[str, str], project_dir: Path, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [podman_compose(), "-p", project_dir.name, "-f", str(project_dir / "compose.yaml"), *args],
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


def sql(env: dict[str, str], project: str, statement: str) -> list[list[str]]:
    """A statement run by psql in the postgres container, its rows' fields."""
    postgres = containers(env, project)["postgres"]["Id"]
    said = podman(env, "exec", postgres, *PSQL, "-c", statement)
    return [line.split("\t") for line in said.splitlines() if line]


def healthy(env: dict[str, str], project: str, service: str) -> bool:
    """The service's own health check, run once (no systemd runs it on a schedule)."""
    container = containers(env, project)[service]["Id"]
    done = subprocess.run(
        ["podman", "healthcheck", "run", container], env=env, capture_output=True, timeout=60
    )
    return done.returncode == 0


def test_the_compose_stack_processes_a_signed_delivery_as_a_user_that_is_not_root(
    env, images, tmp_path
):
    project_dir = tmp_path / f"hooklatch-deploy-{secrets.token_hex(4)}"
    project_dir.mkdir()
    project = project_dir.name
    web_port = free_port()
    (project_dir / "compose.yaml").write_text(yaml.safe_dump(as_written(images["services"])))
    (project_dir / ".env").write_text(dot_env(images["hooklatch"], web_port))
    started = time.monotonic()
    try:
        # In the order depends_on gives (test_compose_file.py checks it), one step at a
        # time: podman-compose passes depends_on to podman as --requires, and podman 4.3
        # (Debian 12's) then fails to start web, worker and relay ("container ... depends
        # on container ... not found in input list") once release has exited.
        compose_cmd(env, project_dir, "up", "-d", "--no-deps", "postgres", "redis")
        for service in ("postgres", "redis"):
            wait_for(
                partial(healthy, env, project, service),
                timeout=120,
                interval=1,
                message=f"{service} healthy",
            )
        sql(env, project, "CREATE TABLE deployed_effects (external_id text, uid int)")
        compose_cmd(env, project_dir, "up", "--no-deps", "release")
        compose_cmd(env, project_dir, "up", "-d", "--no-deps", "web", "worker", "relay")
        _check_the_stack(env, project, web_port, started)
    except BaseException:
        print(logs(env, project))
        raise
    finally:
        compose_cmd(env, project_dir, "down", "-v", "-t", "30", timeout=180)
    assert containers(env, project) == {}
    networks = podman(env, "network", "ls", "--format", "{{.Name}}").split()
    assert f"{project}_default" not in networks


def _check_the_stack(env: dict[str, str], project: str, web_port: int, started: float) -> None:
    running = containers(env, project)
    release = running["release"]["State"]
    assert (release["Status"], release["ExitCode"]) == ("exited", 0)
    # Each on the compose network, none on the host's: the services find each other by name.
    for service, container in running.items():
        assert container["HostConfig"]["NetworkMode"] != "host", service
    # Reached where the file publishes it: 127.0.0.1 on the host, gunicorn's default bind
    # (every address) inside the container.
    base = f"http://127.0.0.1:{web_port}"

    def web_answers() -> bool:
        try:
            return requests.get(base + "/livez", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    wait_for(web_answers, timeout=120, interval=0.5, message="web answering /livez")
    assert requests.get(base + "/readyz", timeout=5).status_code == 200  # database, schema
    web = running["web"]["Id"]
    # The Python the image runs is the one python:3.11-slim-bookworm has.
    assert podman(env, "exec", web, "python3", "--version").startswith("Python 3.11.")
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

    def handled() -> list[list[str]]:
        return sql(env, project, "SELECT external_id, uid FROM deployed_effects")

    processed_at = wait_for(handled, timeout=60, interval=0.5, message="the event handled")
    print(f"compose up to the first processed event: {processed_at - started:.1f} s")
    assert handled() == [["evt_deployed", USER]]  # run once, by the work horse, as 10001
    assert sql(env, project, "SELECT status FROM events") == [["processed"]]

    said = container_log(env, web)
    assert " ERROR " not in said and "Traceback" not in said, said

    assert healthy(env, project, "web")
    assert containers(env, project)["web"]["State"]["Health"]["Status"] == "healthy"
    for service in ("web", "worker", "relay"):
        container = containers(env, project)[service]
        assert container["State"]["Status"] == "running", service
        assert container["Config"]["User"] == f"{USER}:{USER}"
        assert process_users(env, container["Id"]) == {USER}, service
