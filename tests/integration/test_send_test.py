"""`hooklatch send-test` on a provider that cannot sign a test request says so in one line."""

import subprocess

from tests.support.install import ROOT
from tests.support.plugins import plugin_site
from tests.support.processes import hooklatch_cmd, process_env

UNSIGNED = """
from datetime import timedelta
from hooklatch.providers import IncomingEvent, Provider, json_object


class Unsigned(Provider):
    name = "unsigned"
    retry_window = timedelta(days=1)

    def verify(self, delivery, *, secrets, now):
        pass

    def parse(self, delivery):
        return [IncomingEvent(json_object(delivery.body)["id"], "thing.done")]


class NoSigner(Unsigned):
    name = "nosigner"

    def sample_event(self, *, now):
        return {"Content-Type": "application/json"}, b'{"id": "evt_1"}'
"""


def run(env, *args):
    return subprocess.run(
        hooklatch_cmd(*args), env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def test_send_test_on_a_plugin_that_cannot_sign_says_so_in_one_line(tmp_path, settings):
    site = plugin_site(
        tmp_path / "site",
        "unsigned_hooks",
        UNSIGNED,
        "unsigned = unsigned_hooks:Unsigned",
        "nosigner = unsigned_hooks:NoSigner",
    )
    env = process_env(settings, PYTHONPATH=f"{site}:{ROOT}")
    for provider, missing in (("unsigned", "sample_event()"), ("nosigner", "sign()")):
        added = run(env, "endpoints", "add", provider, "--name", provider, "--secret", "s3cret")
        assert added.returncode == 0, added.stderr
        # Nothing listens there: the command must stop before it sends anything.
        result = run(env, "send-test", provider, "--url", "http://127.0.0.1:9")
        assert result.returncode == 1, result.stdout + result.stderr
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line == (
            f"Error: provider {provider!r} cannot sign test requests: its plugin does not "
            f'implement {missing} (docs/plugins.md, "Test deliveries"). Send a test from '
            "the sender's own dashboard instead."
        )
        assert "s3cret" not in result.stderr
