"""Plugins are found through entry points and checked at start; a broken one is named."""

import subprocess
import sys

import pytest

from tests.support.install import ROOT
from tests.support.plugins import plugin_site

PLUGIN = """
from datetime import timedelta
from hooklatch.providers.base import IncomingEvent, Provider


class NoParse(Provider):
    name = "acme"

    def verify(self, delivery, *, secrets, now):
        pass


class Parses(NoParse):
    def parse(self, delivery):
        return []


class OldStyle(Parses):
    def verify(self, headers, body, secrets, now):
        pass


class OldHandshake(Parses):
    def handshake(self, delivery):
        return None


class Acme(Parses):
    retry_window = timedelta(days=1)


class Stripeish(Parses):
    name = "stripe"
"""


def start_with_plugin(tmp_path, entry_point, **env):
    """Run a command that loads the providers, with one extra installed distribution."""
    site = plugin_site(tmp_path / "site", "acme_hooks", PLUGIN, entry_point)
    return subprocess.run(
        [sys.executable, "-m", "hooklatch", "providers"],
        cwd=tmp_path,
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{site}:{ROOT}",
            "HOOKLATCH_INSTANCE_PATH": str(tmp_path / "instance"),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("entry_point", "message"),
    [
        ("acme = acme_hooks:NoParse", "'acme = acme_hooks:NoParse' does not implement parse()"),
        ("acme = acme_hooks:OldStyle", "'acme = acme_hooks:OldStyle': verify() does not take"),
        (
            "acme = acme_hooks:OldHandshake",
            "'acme = acme_hooks:OldHandshake': handshake() does not take",
        ),
        ("stripe = acme_hooks:Stripeish", "provider name 'stripe' is registered twice"),
        ("acme = acme_hooks:Missing", "'acme = acme_hooks:Missing' failed to import"),
    ],
)
def test_a_broken_plugin_stops_the_start_with_a_message_naming_it(tmp_path, entry_point, message):
    result = start_with_plugin(tmp_path, entry_point)
    assert result.returncode == 1, result.stdout + result.stderr
    assert message in result.stderr, result.stderr


def test_a_dedupe_retention_shorter_than_a_retry_window_is_refused_at_start(tmp_path):
    result = start_with_plugin(
        tmp_path, "acme = acme_hooks:Acme", HOOKLATCH_DEDUPE_RETENTION_DAYS="2"
    )
    assert result.returncode == 1
    assert "HOOKLATCH_DEDUPE_RETENTION_DAYS=2 is shorter than provider" in result.stderr
    name, days = next(
        (name, window.days) for name, window in installed_windows() if window.days > 2
    )
    assert f"provider {name!r}'s retry window ({days} days)" in result.stderr


def test_a_valid_plugin_is_listed_and_its_retry_window_is_respected(tmp_path):
    listed = start_with_plugin(tmp_path, "acme = acme_hooks:Acme")
    assert listed.returncode == 0, listed.stderr
    assert "acme_hooks.Acme" in listed.stdout
    longest = max(window.days for _, window in installed_windows())
    result = start_with_plugin(
        tmp_path, "acme = acme_hooks:Acme", HOOKLATCH_DEDUPE_RETENTION_DAYS=str(longest)
    )
    assert result.returncode == 0, result.stderr


def installed_windows():
    """The installed providers' retry windows, by name, as the start-up check reads them."""
    from hooklatch.providers.loading import load_providers

    return sorted((name, p.retry_window) for name, p in load_providers().items())


def test_settings_name_the_retention_variable():
    from hooklatch.settings import Settings, SettingsError, check_retention

    class Slow:
        retry_window = __import__("datetime").timedelta(days=7)

    with pytest.raises(SettingsError, match="provider 'slow'"):
        check_retention(Settings(dedupe_retention_days=3), {"slow": Slow()})
    check_retention(Settings(dedupe_retention_days=7), {"slow": Slow()})
