"""docs/alerts.yml is valid for Prometheus, and each of its alerts fires on the fixture's
series (tests/fixtures/alerts_test.yml) and stays quiet before."""

from __future__ import annotations

from tests.support.install import ROOT
from tests.support.metrics import run_promtool

RULES = ROOT / "docs" / "alerts.yml"
FIXTURE = ROOT / "tests" / "fixtures" / "alerts_test.yml"


def test_alert_rules_are_valid():
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "8 rules found" in checked.stdout


def test_every_alert_fires_on_its_fixture_series():
    tested = run_promtool("test", "rules", str(FIXTURE))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    names = {
        line.split(":", 1)[1].strip()
        for line in RULES.read_text().splitlines()
        if line.strip().startswith("- alert:")
    }
    fixture = FIXTURE.read_text()
    assert all(f"alertname: {name}" in fixture for name in names), names
