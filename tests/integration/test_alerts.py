"""docs/alerts.yml is valid for Prometheus, and each of its alerts fires on the fixture's
series (tests/fixtures/alerts_test.yml) and stays quiet before."""

from __future__ import annotations

import json
import re

from prometheus_client.parser import text_string_to_metric_families

from tests.support.install import ROOT
from tests.support.metrics import TOKEN_HEADER, run_promtool
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.signing import github_headers

RULES = ROOT / "docs" / "alerts.yml"
FIXTURE = ROOT / "tests" / "fixtures" / "alerts_test.yml"


def test_alert_rules_are_valid():
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "17 rules found" in checked.stdout


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


def test_the_rules_name_only_series_and_outcomes_that_hooklatch_exports(client, runtime):
    """A metric or a reason renamed in the code would leave a rule silent for ever: every
    hooklatch_ series the rules read is in a real scrape, and every outcome, reason or
    status they match is a word the code gives."""
    endpoint, _ = make_endpoint(runtime)
    deliver(client, endpoint, "evt_alerts")
    github, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    for number in (1, 2):  # the same unsigned id with two bodies: a conflict
        body = json.dumps({"issue": {"number": number}}).encode()
        headers = github_headers(body, "gh-secret", delivery="d-1")
        assert client.post(f"/hooks/{github}", data=body, headers=headers).status_code == 200
    wait_for(
        lambda: "hooklatch_events_dead" in client.get("/metrics", headers=TOKEN_HEADER).text,
        timeout=10,
        message="the database gauges read",
    )
    scraped = {
        family.name
        for family in text_string_to_metric_families(
            client.get("/metrics", headers=TOKEN_HEADER).text
        )
    }
    rules = RULES.read_text()
    series = set(re.findall(r"\b(hooklatch_[a-z_]+?)(?:_total)?\b", rules))
    assert series and series <= scraped, series - scraped

    source = "\n".join(path.read_text() for path in (ROOT / "app").rglob("*.py"))
    words = {
        value
        for match in re.findall(r'(?:outcome|reason|status)[=!][=~]?"([^"]+)"', rules)
        for value in match.split("|")
    }
    assert {"bad_signature", "store_unavailable", "unauthorized", "finished"} <= words
    assert all(f'"{value}"' in source for value in words), words
