"""Podman, set up to run deploy/'s image and compose file on a machine like CI's: no
image registry (the base image is made from Debian's packages with mmdebstrap, and
PostgreSQL's and Redis's from it), no systemd (health checks are run on demand), cgroups
v1 beside v2 (crun refuses that mix: runc runs the containers), and hard limits podman
may not raise."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from tests.support.install import ROOT
from tests.support.tools import needed_tool

# What the official python:3.11-slim-bookworm has: Python with venv and its headers,
# useradd, CA certificates. Debian 12, as that image is: its python3 is 3.11 (3.11.2).
BASE_PACKAGES = ("python3", "python3-venv", "python3-dev", "passwd", "ca-certificates")
BASE_SUITE = "bookworm"
# Outside the clone: CI starts from a fresh one every run. Keyed by what makes the image.
CACHE = Path(os.environ.get("HOOKLATCH_DEPLOY_CACHE", "/var/cache/hooklatch-deploy"))
# PostgreSQL and Redis from Debian's packages, started as the official images start them
# from the compose file's settings (tests/deploy/services/).
SERVICES = ROOT / "tests" / "deploy" / "services"
# The machine's CA bundle, which pip inside the build must trust where HTTPS goes
# through an intercepting proxy; mounted for the build's RUN steps only, never in a layer.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def podman_compose() -> str:
    return needed_tool("podman-compose", install="make test-deploy installs it")


def run_tag(name: str) -> str:
    """An image name of this test run's own: a run beside it (CI on the same machine)
    builds under another, so neither runs the other's image."""
    return f"localhost/{name}:test-{uuid.uuid4().hex[:12]}"


def podman_env(directory: Path) -> dict[str, str]:
    """The environment podman (and podman-compose, which runs it) gets: a containers.conf
    of the test's own that chooses runc and limits no higher than this process's."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    # podman lowers its own RLIMIT_NPROC to 32768 before it starts the runtime.
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[1], 32768)
    conf = directory / "containers.conf"
    conf.write_text(
        "[containers]\n"
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        "[engine]\n"
        'runtime = "runc"\n'
    )
    return {**os.environ, "CONTAINERS_CONF": str(conf)}


def podman(env: dict[str, str], *args: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(
        ["podman", *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: {done.returncode}\n{done.stderr}")
    return done.stdout


def base_image(env: dict[str, str]) -> str:
    """A Debian 12 (bookworm) image with Python 3.11, made by mmdebstrap from Debian's
    packages (no image registry is reachable), kept in CACHE and in podman's storage."""
    recipe = (
        f"mmdebstrap --variant=apt --format=tar --include={','.join(BASE_PACKAGES)} {BASE_SUITE}"
    )
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    name = f"localhost/hooklatch-test-python:{key}"
    if subprocess.run(["podman", "image", "exists", name], env=env).returncode == 0:
        return name
    tarball = CACHE / f"python-{key}.tar"
    if not tarball.exists():
        needed_tool("mmdebstrap", apt="mmdebstrap")
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            [*recipe.split(), str(partial)], check=True, capture_output=True, timeout=900
        )
        partial.rename(tarball)
    podman(env, "import", str(tarball), name, timeout=300)
    return name


def services_image(env: dict[str, str], base: str) -> str:
    """PostgreSQL and Redis installed from Debian's packages on ``base``, kept in podman's
    storage under a name that changes with what makes it."""
    made_of = [base, *(path.read_text() for path in sorted(SERVICES.iterdir()))]
    key = hashlib.sha256("\n".join(made_of).encode()).hexdigest()[:16]
    name = f"localhost/hooklatch-test-services:{key}"
    if subprocess.run(["podman", "image", "exists", name], env=env).returncode != 0:
        build(env, SERVICES, SERVICES / "Containerfile", name, {"BASE": base})
    return name


def build_image(env: dict[str, str], base: str, directory: Path, tag: str) -> float:
    """deploy/Dockerfile built on ``base`` as ``tag``; returns the seconds it took."""
    started = time.monotonic()
    build(env, ROOT, ROOT / "deploy" / "Dockerfile", tag, {"PYTHON_IMAGE": base}, directory)
    return time.monotonic() - started


def build(
    env: dict[str, str],
    context: Path,
    containerfile: Path,
    tag: str,
    args: dict[str, str],
    directory: Path | None = None,
) -> None:
    """``podman build``, trusting the machine's CA bundle in RUN steps where it has one."""
    mounts = []
    if directory is not None and HOST_CA_BUNDLE.exists():
        mounts = _ca_mounts(directory)
    arguments = [word for key, value in args.items() for word in ("--build-arg", f"{key}={value}")]
    done = subprocess.run(
        [
            "podman",
            "build",
            # Docker's image format: OCI's has no HEALTHCHECK.
            "--format",
            "docker",
            *mounts,
            *arguments,
            "-f",
            str(containerfile),
            "-t",
            tag,
            str(context),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise AssertionError(f"podman build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")


def _ca_mounts(directory: Path) -> list[str]:
    pip_conf = directory / "pip.conf"
    pip_conf.write_text(f"[global]\ncert = {HOST_CA_BUNDLE}\n")
    return ["-v", f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro", "-v", f"{pip_conf}:/etc/pip.conf:ro"]


def containers(env: dict[str, str], project: str) -> dict[str, dict[str, Any]]:
    """The project's containers by service, as `podman inspect` describes them."""
    ids = podman(
        env, "ps", "-a", "-q", "--filter", f"label=com.docker.compose.project={project}"
    ).split()
    if not ids:
        return {}
    found = json.loads(podman(env, "inspect", *ids))
    return {c["Config"]["Labels"]["com.docker.compose.service"]: c for c in found}


def process_users(env: dict[str, str], container: str) -> set[str]:
    """The user ids every process of the container runs as."""
    lines = podman(env, "top", container, "huser").split()
    return set(lines[1:])
