"""The example third-party plugin, installed with pip, is discovered and receives events."""

import hashlib
import hmac
import json
import subprocess
import sys
import time

import pytest
import requests

from tests.support.database import count
from tests.support.install import ROOT
from tests.support.processes import hooklatch_cmd, process_env, start_gunicorn

PACKAGE = ROOT / "examples" / "hooklatch-acme"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`pip install` the package into a folder of its own (not this environment)."""
    site = tmp_path_factory.mktemp("acme-site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(PACKAGE),
        ],
        check=True,
        timeout=300,
    )
    return site


def in_the_package(installed, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` in the example's folder, with the installed plugin and
    hooklatch (from this checkout) importable and nothing else of this environment's."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=PACKAGE,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{installed}:{ROOT}"},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_the_plugins_own_tests_pass_the_conformance_kit(installed):
    result = in_the_package(installed, "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "11 passed" in result.stdout, result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "passed"),
    [("acme", 10), ("tests/test_conformance.py:TestAcmeConformance", 11)],
)
def test_the_kit_run_as_a_command_passes_the_installed_plugin(installed, target, passed):
    result = in_the_package(installed, "hooklatch.testing", target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{passed} passed, 0 failed", result.stdout


@pytest.mark.slow
def test_an_installed_plugin_receives_events_through_gunicorn(
    installed, procs, proc_settings, runtime
):
    pythonpath = f"{installed}:{ROOT}"
    env = process_env(proc_settings, PYTHONPATH=pythonpath)
    created = subprocess.run(
        hooklatch_cmd(
            "endpoints", "add", "acme", "--name", "shop", "--secret", "acme-key", "--json"
        ),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert created.returncode == 0, created.stderr
    endpoint = json.loads(created.stdout)["id"]
    base, _ = start_gunicorn(procs, proc_settings, PYTHONPATH=pythonpath)

    body = json.dumps({"id": "acme_evt_1", "kind": "order.shipped", "at": 1700000000}).encode()
    timestamp = int(time.time())
    # Acme's scheme, computed here independently of the plugin's code.
    digest = hmac.new(b"acme-key", b"%d." % timestamp + body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-Acme-Timestamp": str(timestamp),
        "X-Acme-Signature": f"v1={digest}",
    }
    response = requests.post(f"{base}/hooks/{endpoint}", data=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "accepted"
    stored = "SELECT count(*) FROM events WHERE provider = 'acme' AND external_id = 'acme_evt_1'"
    assert count(runtime, stored) == 1

    headers["X-Acme-Signature"] = "v1=" + "0" * 64
    refused = requests.post(f"{base}/hooks/{endpoint}", data=body, headers=headers, timeout=10)
    assert (refused.status_code, refused.json()["error"]) == (401, "bad_signature")
