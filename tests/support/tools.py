"""Programs some tests run (nginx, promtool, chromium, podman, systemd-analyze, and
podman-compose, a Python package `make test-deploy` installs).

CI installs each (.ci/run, the Makefile), so there a missing one fails its tests.
Elsewhere the tests that need it are skipped, saying how to install it, and the rest of
the suite runs: `make test` on a machine with only PostgreSQL and Redis passes.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping

import pytest

# Where Debian puts daemons (nginx), which a user's PATH may not name.
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


def in_ci(environ: Mapping[str, str] = os.environ) -> bool:
    return environ.get("CI", "").lower() not in ("", "0", "false", "no")


def needed_tool(
    *names: str,
    apt: str = "",
    install: str = "",
    environ: Mapping[str, str] = os.environ,
) -> str:
    """The path of the first of ``names`` found on PATH, in this virtualenv's scripts or
    in an sbin folder; if none is, the test is skipped, or under CI fails, naming the
    Debian package ``apt`` (or saying ``install``: how to get one that is not)."""
    scripts = os.path.dirname(sys.executable)
    search = os.pathsep.join([environ.get("PATH", os.defpath), scripts, *SBIN])
    for name in names:
        path = shutil.which(name, path=search)
        if path is not None:
            return path
    missing = f"{names[0]} is not installed ({install or f'apt-get install {apt}'})"
    if in_ci(environ):  # .ci/run installs it: there, its absence is a failure
        pytest.fail(missing)
    pytest.skip(missing)
