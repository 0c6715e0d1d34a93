"""The conformance kit's two faces, run as a plugin author runs them: `python -m
hooklatch.testing` and pytest with hooklatch's plugin, which a project enables itself
(`pytest_plugins` in its conftest.py): installing hooklatch adds nothing to a pytest run."""

import subprocess
import sys

import pytest

from tests.support.install import ROOT

ENV = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}


def run(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120
    )


def kit(target, *options):
    return run("-m", "hooklatch.testing", target, *options)


@pytest.mark.parametrize(
    ("target", "passed"),
    [
        ("stripe", 10),  # an installed provider, with its own sample and signer
        ("tests.support.kit_providers:KitProvider", 10),  # a provider class
        ("tests.support.kit_providers:KitCase", 11),  # a description, as pytest runs it
    ],
)
def test_a_conforming_provider_passes_and_the_command_exits_0(target, passed):
    result = kit(target)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == f"{passed} passed, 0 failed"
    assert "  ok     valid_request_is_accepted" in result.stdout


def test_a_failing_check_is_printed_with_what_was_expected_and_got_and_the_exit_is_1():
    result = kit("tests.support.kit_providers:WrongIdsCase")
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        "  FAIL   valid_request_is_accepted: expected accepted with ids ['evt_conf_valid']; "
        "got accepted with ids ['evt_same']"
    ) in result.stdout.splitlines()
    assert result.stdout.splitlines()[-1] == "5 passed, 6 failed"
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nosuch", "error: no provider 'nosuch' is installed (installed: discord, "),
        ("tests.support.kit_providers:Nothing", "error: tests.support.kit_providers has no "),
        ("discord", "error: a discord endpoint holds Discord's public key, which cannot sign"),
    ],
)
def test_checks_that_cannot_run_say_why_in_one_line_and_exit_2(target, message):
    result = kit(target)
    assert result.returncode == 2, result.stdout + result.stderr
    [line] = result.stderr.splitlines()
    assert line.startswith(message), line


def test_a_plugin_whose_provider_cannot_sign_is_told_what_to_implement(tmp_path):
    (tmp_path / "unsigned.py").write_text(
        "from datetime import timedelta\n"
        "from hooklatch.providers import Provider\n\n\n"
        "class Unsigned(Provider):\n"
        "    name = 'unsigned'\n"
        "    retry_window = timedelta(days=1)\n\n"
        "    def verify(self, delivery, *, secrets, now): pass\n\n"
        "    def parse(self, delivery): return []\n\n"
        "    def sample_event(self, *, now): return {}, b'{}'\n"
    )
    result = run("-m", "hooklatch.testing", "unsigned:Unsigned", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.splitlines() == [
        "error: provider 'unsigned' cannot sign test requests: its plugin does not implement "
        'sign() (docs/plugins.md, "Test deliveries"). Send a test from the sender\'s own '
        "dashboard instead."
    ]


TINY = """
from tests.support.kit_providers import KitCase, WrongIdsCase


class TestKit(KitCase):
    pass


class TestWrongIds(WrongIdsCase):
    pass
"""


ENABLED = 'pytest_plugins = ["hooklatch.testing.plugin"]\n'

NOTHING_LOADED = """
import sys


def test_hooklatch_is_not_imported():
    assert [name for name in sys.modules if name.split(".")[0] == "hooklatch"] == []
"""


def pytest_run(*args, cwd):
    return run("-m", "pytest", "-p", "no:cacheprovider", *args, cwd=cwd)


def test_with_pytest_plugins_in_a_conftest_the_checks_run_and_report_expected_and_got(tmp_path):
    (tmp_path / "conftest.py").write_text(ENABLED)
    (tmp_path / "test_tiny.py").write_text(TINY)
    result = pytest_run("-q", "test_tiny.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "6 failed, 16 passed" in result.stdout, result.stdout
    assert (
        "valid_request_is_accepted: expected accepted with ids ['evt_conf_valid']; "
        "got accepted with ids ['evt_same']"
    ) in result.stdout
    verbose = pytest_run("-v", "test_tiny.py", cwd=tmp_path)
    assert "TestKit::test_conformance[stale_timestamp_is_refused] PASSED" in verbose.stdout


def test_pytest_p_enables_the_plugin_for_one_run(tmp_path):
    (tmp_path / "test_tiny.py").write_text(TINY)
    result = pytest_run("-q", "-p", "hooklatch.testing.plugin", "test_tiny.py", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "6 failed, 16 passed" in result.stdout, result.stdout


def test_installing_hooklatch_adds_no_plugin_to_a_pytest_run(tmp_path):
    (tmp_path / "test_nothing_loaded.py").write_text(NOTHING_LOADED)
    result = pytest_run("--trace-config", "test_nothing_loaded.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [listed] = [line for line in result.stdout.splitlines() if line.startswith("plugins:")]
    assert "hooklatch" not in listed, listed
    assert "PLUGIN registered: <module 'hooklatch" not in result.stdout

    # Nothing makes the checks' tests of a description, until a conftest enables the plugin.
    (tmp_path / "test_tiny.py").write_text(TINY)
    tiny = pytest_run("test_tiny.py", cwd=tmp_path)
    assert tiny.returncode == 1
    assert "fixture 'hooklatch_check' not found" in tiny.stdout
