"""deploy/systemd: units that systemd accepts as they are, start in the release order,
stop as the processes need, and run hardened as a user of their own."""

from __future__ import annotations

import re

import pytest

from hooklatch.settings import Settings
from tests.support.systemd import UNITS, directives, local_copies, verify

PROCESSES = ("hooklatch-web.service", "hooklatch-worker@.service", "hooklatch-relay.service")
EVERY_SERVICE = ("hooklatch-migrate.service", *PROCESSES)


def test_the_units_are_the_ones_documented():
    assert sorted(p.name for p in UNITS.iterdir()) == sorted((*EVERY_SERVICE, "hooklatch.target"))


@pytest.mark.parametrize("name", [*EVERY_SERVICE, "hooklatch.target"])
def test_systemd_analyze_verify_accepts_the_unit(name, tmp_path):
    copies = {p.name: p for p in local_copies(tmp_path)}
    status, said = verify(copies[name])
    assert (status, said) == (0, "")


def test_a_misspelt_directive_fails_the_check(tmp_path):
    """verify only warns about an unknown key (exit 0): the check reads what it says."""
    unit = {p.name: p for p in local_copies(tmp_path)}["hooklatch-web.service"]
    unit.write_text(unit.read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    status, said = verify(unit)
    assert status == 0
    assert "Unknown key 'NoNewPrivilege'" in said


def test_a_missing_program_fails_the_check(tmp_path):
    unit = {p.name: p for p in local_copies(tmp_path)}["hooklatch-worker@.service"]
    broken = "ExecStart=/nonexistent/hooklatch"
    unit.write_text(re.sub(r"^ExecStart=\S+", broken, unit.read_text(), flags=re.M))
    status, said = verify(unit)
    assert status != 0
    assert "/nonexistent/hooklatch is not executable" in said


@pytest.mark.parametrize("name", PROCESSES)
def test_web_worker_and_relay_start_only_after_the_migrations_succeed(name):
    unit = directives(UNITS / name)["Unit"]
    assert "hooklatch-migrate.service" in unit["Requires"].split()
    assert "hooklatch-migrate.service" in unit["After"].split()


def test_the_migrations_run_once_to_the_end():
    service = directives(UNITS / "hooklatch-migrate.service")["Service"]
    assert service["Type"] == "oneshot"
    assert service["RemainAfterExit"] == "yes"
    assert service["ExecStart"] == "/opt/hooklatch/bin/hooklatch db upgrade"


def test_the_web_unit_starts_gunicorn_as_an_installed_package_is_started():
    service = directives(UNITS / "hooklatch-web.service")["Service"]
    assert service["ExecStart"] == (
        '/opt/hooklatch/bin/gunicorn "hooklatch:create_app()" -c python:hooklatch.gunicorn_config'
    )


def test_a_stopping_worker_gets_longer_than_it_gives_its_work_horse():
    """SIGTERM goes to the worker alone (it passes it on to the horse, which finishes its
    chunk); systemd kills what is left only after the worker's own deadline."""
    service = directives(UNITS / "hooklatch-worker@.service")["Service"]
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"
    assert _seconds(service["TimeoutStopSec"]) > Settings.worker_stop_seconds


def test_each_worker_instance_serves_its_metrics_on_a_port_of_its_own():
    """One environment file for every process: the instance names the worker's port."""
    service = directives(UNITS / "hooklatch-worker@.service")["Service"]
    assert service["Environment"] == "HOOKLATCH_WORKER_METRICS_PORT=%i"
    target = directives(UNITS / "hooklatch.target")["Unit"]
    assert "hooklatch-worker@9102.service" in target["Wants"].split()


@pytest.mark.parametrize("name", EVERY_SERVICE)
def test_every_service_runs_hardened_as_the_hooklatch_user(name):
    service = directives(UNITS / name)["Service"]
    assert service["User"] == service["Group"] == "hooklatch"
    assert service["EnvironmentFile"] == "/etc/hooklatch/hooklatch.env"
    assert service["NoNewPrivileges"] == "yes"
    assert service["ProtectSystem"] == "strict"
    assert service["PrivateTmp"] == "yes"  # where the metrics files are written
    assert service["CapabilityBoundingSet"] == ""
    if name != "hooklatch-migrate.service":
        assert service["Restart"] == "on-failure"


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+)(s|min)?", value)
    assert match, value
    return int(match[1]) * (60 if match[2] == "min" else 1)
