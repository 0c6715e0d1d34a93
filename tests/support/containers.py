"""Podman, set up to run deploy/'s image and compose file on a machine like CI's: no
image registry (the base image is made from Debian's packages with mmdebstrap), no
systemd (health checks are run on demand), cgroups v1 beside v2 (crun refuses that
mix: runc runs the containers), and hard limits podman may not raise."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.install import ROOT

# What the official python:3.11-slim-bookworm has: Python with venv and its headers,
# useradd, CA certificates. Debian 13's Python (3.13): Debian 12's is 3.11.2, on which
# redis needs async-timeout, which the lock files (made on 3.11.7) leave out.
BASE_PACKAGES = ("python3", "python3-venv", "python3-dev", "passwd", "ca-certificates")
BASE_SUITE = "trixie"
# Outside the clone: CI starts from a fresh one every run. Keyed by what makes the image.
CACHE = Path(os.environ.get("HOOKLATCH_DEPLOY_CACHE", "/var/cache/hooklatch-deploy"))
IMAGE = "localhost/hooklatch:test"
# The machine's CA bundle, which pip inside the build must trust where HTTPS goes
# through an intercepting proxy; mounted for the build's RUN steps only, never in a layer.
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")


def require(tool: str) -> str:
    """The tool's path: this virtualenv's (podman-compose) or the system's."""
    beside = Path(sys.executable).parent / tool
    path = str(beside) if beside.exists() else shutil.which(tool)
    if path is None:
        missing = f"{tool} is not installed (.ci/run installs podman, buildah, runc, mmdebstrap)"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return path


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
    """A Debian bookworm image with Python 3.11, made by mmdebstrap from Debian's packages
    (no image registry is reachable), kept in CACHE and in podman's storage."""
    recipe = (
        f"mmdebstrap --variant=apt --format=tar --include={','.join(BASE_PACKAGES)} {BASE_SUITE}"
    )
    key = hashlib.sha256(recipe.encode()).hexdigest()[:16]
    name = f"localhost/hooklatch-test-python:{key}"
    if subprocess.run(["podman", "image", "exists", name], env=env).returncode == 0:
        return name
    tarball = CACHE / f"python-{key}.tar"
    if not tarball.exists():
        require("mmdebstrap")
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(
            [*recipe.split(), str(partial)], check=True, capture_output=True, timeout=900
        )
        partial.rename(tarball)
    podman(env, "import", str(tarball), name, timeout=300)
    return name


def build_image(env: dict[str, str], base: str, directory: Path) -> float:
    """deploy/Dockerfile built on ``base`` as IMAGE; returns the seconds it took."""
    pip_conf = directory / "pip.conf"
    pip_conf.write_text(f"[global]\ncert = {HOST_CA_BUNDLE}\n")
    mounts = []
    if HOST_CA_BUNDLE.exists():
        mounts = [
            "-v",
            f"{HOST_CA_BUNDLE}:{HOST_CA_BUNDLE}:ro",
            "-v",
            f"{pip_conf}:/etc/pip.conf:ro",
        ]
    started = time.monotonic()
    done = subprocess.run(
        [
            "podman",
            "build",
            # Docker's image format: OCI's has no HEALTHCHECK.
            "--format",
            "docker",
            *mounts,
            "--build-arg",
            f"PYTHON_IMAGE={base}",
            "-f",
            str(ROOT / "deploy" / "Dockerfile"),
            "-t",
            IMAGE,
            str(ROOT),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    if done.returncode != 0:
        raise AssertionError(f"podman build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return time.monotonic() - started


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
