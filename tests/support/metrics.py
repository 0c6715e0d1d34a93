"""Reading Prometheus' text format in tests, with prometheus_client's own parser."""

from __future__ import annotations

import subprocess

import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.support.tokens import AUTH
from tests.support.tools import needed_tool

TOKEN_HEADER = AUTH


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the first sample ``name`` with these labels (others ignored); 0 if
    there is none, as for a counter not counted yet."""
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            if item.name == name and all(item.labels.get(k) == v for k, v in labels.items()):
                return float(item.value)
    return 0.0


def label_values(text: str, name: str, label: str) -> set[str]:
    return {
        item.labels[label]
        for family in text_string_to_metric_families(text)
        for item in family.samples
        if item.name == name and label in item.labels
    }


def scrape(url: str, headers: dict[str, str] | None = None) -> str:
    response = requests.get(url, headers=headers or {}, timeout=10)
    assert response.status_code == 200, response.text
    return response.text


def promtool() -> str:
    """The path of promtool (Debian's prometheus package; CI installs it)."""
    return needed_tool("promtool", apt="prometheus")


def run_promtool(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *args], input=stdin, capture_output=True, text=True, timeout=60
    )
