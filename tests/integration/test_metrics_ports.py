"""Relays and workers started on one host from one environment each serve their metrics,
on a port of their own (HOOKLATCH_RELAY_METRICS_PORT, HOOKLATCH_WORKER_METRICS_PORT), at
HOOKLATCH_METRICS_ADDRESS: this host only unless told. A port that is taken stops the
process with one line naming its setting."""

from __future__ import annotations

import ipaddress
import socket
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.metrics import run_promtool, sample, scrape
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import free_port, hooklatch_cmd, listening, process_env
from tests.support.series import exported

ROOT = Path(__file__).resolve().parents[2]


def listeners(port: int) -> set[str]:
    """The addresses a TCP socket listens on ``port`` at, on this host (/proc/net/tcp)."""
    found = set()
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            address, _, hex_port = local.partition(":")
            if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(address)
            # The kernel prints each 32-bit word in host (little-endian) order.
            words = b"".join(raw[i : i + 4][::-1] for i in range(0, size, 4))
            found.add(str(ipaddress.ip_address(words)))
    return found


def metrics_env(proc_settings, **extra: str) -> dict[str, str]:
    return process_env(proc_settings, HOOKLATCH_JOB_SIZE="1", **extra)


@pytest.mark.slow
def test_a_relay_and_a_worker_from_one_environment_both_serve_on_this_host_only(
    procs, proc_settings, runtime, client
):
    relay_port, worker_port = free_port(), free_port()
    env = metrics_env(
        proc_settings,
        HOOKLATCH_RELAY_METRICS_PORT=str(relay_port),
        HOOKLATCH_WORKER_METRICS_PORT=str(worker_port),
    )
    relay = procs("relay", hooklatch_cmd("relay"), env)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    endpoint, _ = make_endpoint(runtime)
    deliver(client, endpoint, "evt_both_ports", event_type="effect.ports")

    worker_url = f"http://127.0.0.1:{worker_port}/metrics"
    wait_for(
        lambda: (
            sample(scrape(worker_url), "hooklatch_events_handled_total", outcome="processed") == 1
        ),
        timeout=30,
        message="the worker's scrape counts the event",
    )
    relay_url = f"http://127.0.0.1:{relay_port}/metrics"
    wait_for(
        lambda: exported(scrape(relay_url), "hooklatch_backlog_up") == 1,
        timeout=30,
        message="the relay's scrape reads the database",
    )
    assert relay.popen.poll() is None and worker.popen.poll() is None
    assert listeners(relay_port) == {"127.0.0.1"}
    assert listeners(worker_port) == {"127.0.0.1"}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("address", "reached_at"),
    [("127.0.0.2", "127.0.0.2"), ("0.0.0.0", "127.0.0.1")],  # noqa: S104
    ids=["one-address", "every-address"],
)
def test_the_address_setting_chooses_where_metrics_listen(
    procs, proc_settings, address, reached_at
):
    port = free_port()
    env = metrics_env(
        proc_settings, HOOKLATCH_RELAY_METRICS_PORT=str(port), HOOKLATCH_METRICS_ADDRESS=address
    )
    relay = procs("relay", hooklatch_cmd("relay"), env)
    wait_for(lambda: listeners(port) != set(), timeout=30, message="the relay's metrics port")
    assert listeners(port) == {address}
    assert "hooklatch_backlog_up" in scrape(f"http://{reached_at}:{port}/metrics")
    if address != "0.0.0.0":  # noqa: S104
        with pytest.raises(requests.ConnectionError):
            requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    assert relay.popen.poll() is None


def stopped(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """A process that must stop by itself, soon: its exit code and output."""
    done = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.slow
def test_a_second_worker_given_the_same_port_stops_with_one_line_naming_the_setting(
    procs, proc_settings
):
    port = free_port()
    env = metrics_env(proc_settings, HOOKLATCH_WORKER_METRICS_PORT=str(port))
    first = procs("worker", hooklatch_cmd("worker"), env)
    wait_for(lambda: listening(first), timeout=30, message="first worker listening")

    code, output = stopped(hooklatch_cmd("worker"), env)
    assert code == 1, output
    assert output.strip() == (
        f"cannot serve metrics on 127.0.0.1:{port} (HOOKLATCH_WORKER_METRICS_PORT): Address "
        "already in use (by another process: each relay and worker of a host needs a port of "
        "its own)"
    )
    assert first.popen.poll() is None
    assert requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200


def test_a_relay_whose_port_is_taken_stops_with_one_line_naming_the_setting(proc_settings):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = metrics_env(proc_settings, HOOKLATCH_RELAY_METRICS_PORT=str(port))
        code, output = stopped(hooklatch_cmd("relay"), env)
    assert code == 1, output
    assert f"cannot serve metrics on 127.0.0.1:{port} (HOOKLATCH_RELAY_METRICS_PORT)" in output
    assert len(output.strip().splitlines()) == 1, output


def test_the_renamed_port_setting_stops_a_relay_saying_what_replaced_it(proc_settings):
    env = metrics_env(proc_settings, HOOKLATCH_METRICS_PORT=str(free_port()))
    code, output = stopped(hooklatch_cmd("relay"), env)
    assert code == 1, output
    assert output.strip() == (
        "Error: HOOKLATCH_METRICS_PORT is no longer read: set HOOKLATCH_RELAY_METRICS_PORT for "
        "relays and HOOKLATCH_WORKER_METRICS_PORT for workers (a port each, so that one "
        "environment serves both on one host)"
    )


def test_the_documented_scrape_config_is_valid(tmp_path):
    """deploy/prometheus.yml, which docs/operating.md shows, installed as its comments say:
    beside the alerting rules and the token's file."""
    config = tmp_path / "prometheus.yml"
    config.write_text((ROOT / "deploy" / "prometheus.yml").read_text())
    (tmp_path / "hooklatch-alerts.yml").write_text((ROOT / "docs" / "alerts.yml").read_text())
    (tmp_path / "hooklatch-metrics-token").write_text("a-token-for-prometheus\n")
    checked = run_promtool("check", "config", str(config))
    output = checked.stdout + checked.stderr
    assert checked.returncode == 0, output
    assert "SUCCESS: 17 rules found" in output, output


def test_the_scrape_config_the_operating_page_shows_is_the_one_checked():
    """The page's block and deploy/prometheus.yml say the same, comments aside."""
    page = (ROOT / "docs" / "operating.md").read_text()
    block = page.split("```yaml\n", 1)[1].split("```", 1)[0]
    checked = (ROOT / "deploy" / "prometheus.yml").read_text()
    assert yaml.safe_load(block) == yaml.safe_load(checked)
