"""deploy/systemd: units that systemd accepts as they are, start in the release order,
let a deploy run the migrations while the running processes serve (docs/upgrading.md),
stop as the processes need, and run hardened as a user of their own."""

from __future__ import annotations

import re

import pytest

from hooklatch.settings import Settings
from tests.support.install import ROOT
from tests.support.systemd import UNITS, directives, local_copies, verify

PROCESSES = ("hooklatch-web.service", "hooklatch-worker@.service", "hooklatch-relay.service")
EVERY_SERVICE = ("hooklatch-migrate.service", *PROCESSES)
MIGRATE = "hooklatch-migrate.service"
# Every dependency that stops or restarts this unit when the migrations are stopped or
# restarted, or keeps it from starting when they are not active.
COUPLINGS = ("Requires", "Requisite", "BindsTo", "PartOf", "Upholds")


def documented_units() -> list[str]:
    """The units the recipes page's systemd table names, in its first column."""
    page = (ROOT / "docs" / "deploying-recipes.md").read_text()
    section = page.split("\n## systemd\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(hooklatch[^`]*)` \|", section, flags=re.M)


def test_the_units_are_the_ones_documented():
    documented = documented_units()
    assert "hooklatch-migrate.service" in documented
    assert sorted(p.name for p in UNITS.iterdir()) == sorted(documented)


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
def test_web_worker_and_relay_start_only_after_the_migrations_have_run(name):
    """A start of the process pulls the migrations in and waits for them to end."""
    unit = directives(UNITS / name)["Unit"]
    assert MIGRATE in unit["Wants"].split()
    assert MIGRATE in unit["After"].split()


@pytest.mark.parametrize("name", PROCESSES)
def test_running_the_migrations_leaves_web_worker_and_relay_serving(name):
    """docs/upgrading.md: the release step runs while the previous processes serve. A
    Requires= (or any coupling like it) would have systemd stop the process when the
    migrations are restarted, and start it again only once they end."""
    unit = directives(UNITS / name)["Unit"]
    for coupling in COUPLINGS:
        assert MIGRATE not in unit.get(coupling, "").split(), (name, coupling)


def test_each_start_of_the_migrations_runs_them_to_the_end():
    """A oneshot that is inactive again once done: `systemctl start` runs it every time
    (with RemainAfterExit it would stay active, and a deploy's start would do nothing)."""
    service = directives(UNITS / MIGRATE)["Service"]
    assert service["Type"] == "oneshot"
    assert service.get("RemainAfterExit", "no") == "no"
    assert service["ExecStart"] == "/opt/hooklatch/bin/hooklatch db upgrade"


def test_the_recipes_deploy_in_the_order_upgrading_gives():
    """The new release's migrations while the old processes serve, run from the new
    release's own virtualenv; then the link the units run switched to it; then relay and
    workers together, then web."""
    page = (ROOT / "docs" / "deploying-recipes.md").read_text()
    lines = [
        line.strip()
        for line in _deploy_block(page).replace("\\\n", " ").splitlines()
        if line.strip()
    ]
    commands = [line.split("#", 1)[0].split()[:2] for line in lines]
    assert commands == [
        ["systemd-run", "--wait"],
        ["ln", "-sfn"],
        ["systemctl", "restart"],
        ["systemctl", "restart"],
    ]
    migrate, link, relay_and_workers, web = lines
    assert (
        "--uid=hooklatch" in migrate and "EnvironmentFile=/etc/hooklatch/hooklatch.env" in migrate
    )
    assert "$release/bin/hooklatch db upgrade" in migrate
    assert link.split()[2:] == ["$release", "/opt/hooklatch"]
    assert relay_and_workers.endswith("hooklatch-relay.service 'hooklatch-worker@*.service'")
    assert web.endswith("hooklatch-web.service")


def _deploy_block(page: str) -> str:
    """The shell block under the systemd section's "Deploying a new version"."""
    after = page.split("**Deploying a new version.**", 1)[1]
    return after.split("```sh\n", 1)[1].split("```", 1)[0]


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
