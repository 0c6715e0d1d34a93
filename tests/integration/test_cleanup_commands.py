"""Retention from the outside: `hooklatch cleanup [--dry-run]` by hand, and a running
relay that cleans up on its own, with clocks short enough to watch."""

from datetime import UTC, datetime

import requests

from tests.support.cli import run_cli
from tests.support.database import count
from tests.support.pipeline import deliver, drain, make_endpoint, wait_for
from tests.support.processes import free_port, hooklatch_cmd, process_env
from tests.support.series import exported
from tests.support.signing import stripe_event, stripe_headers

LONG_AGO = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # past both default clocks
SECONDS = 1 / 86400  # a retention of N seconds, in the settings' unit (days)


def test_cleanup_dry_run_counts_and_changes_nothing_then_cleanup_deletes(
    runtime, client_at, settings
):
    endpoint, _ = make_endpoint(runtime)
    client, _ = client_at(LONG_AGO)
    for n in range(3):
        body = stripe_event(f"evt_long_ago_{n}")
        headers = stripe_headers(body, "whsec_test_secret", timestamp=int(LONG_AGO.timestamp()))
        assert client.post(f"/hooks/{endpoint}", data=body, headers=headers).status_code == 200
    drain(runtime)

    dry = run_cli(settings, "cleanup", "--dry-run").output
    assert "3 events would be deleted" in dry
    assert count(runtime, "SELECT count(*) FROM events") == 3

    done = run_cli(settings, "cleanup").output
    assert "3 events were deleted, with their attempts and replays" in done
    assert count(runtime, "SELECT count(*) FROM events") == 0
    assert count(runtime, "SELECT count(*) FROM attempts") == 0


def test_cleanup_says_one_of_a_thing_in_the_singular(runtime, client_at, settings):
    endpoint, _ = make_endpoint(runtime)
    client, _ = client_at(LONG_AGO)
    body = stripe_event("evt_long_ago_alone")
    headers = stripe_headers(body, "whsec_test_secret", timestamp=int(LONG_AGO.timestamp()))
    assert client.post(f"/hooks/{endpoint}", data=body, headers=headers).status_code == 200
    drain(runtime)

    done = run_cli(settings, "cleanup").output
    assert "1 event was deleted, with its attempts and replays" in done
    assert "0 payloads were pruned" in done
    assert "1 events" not in done and "1 batches" not in done


def test_a_running_relay_deletes_expired_events_on_its_own(procs, proc_settings, runtime, client):
    endpoint, _ = make_endpoint(runtime)
    metrics_port = free_port()
    env = process_env(
        proc_settings,
        HOOKLATCH_PAYLOAD_RETENTION_DAYS=str(1 * SECONDS),
        HOOKLATCH_DEDUPE_RETENTION_DAYS=str(8 * SECONDS),
        HOOKLATCH_UNSAFE_SHORT_RETENTION="true",
        HOOKLATCH_CLEANUP_INTERVAL_SECONDS="0.2",
        HOOKLATCH_RELAY_METRICS_PORT=str(metrics_port),
    )
    relay = procs("relay", hooklatch_cmd("relay"), env)
    procs("worker", [*hooklatch_cmd("worker"), "--simple"], env)
    first = deliver(client, endpoint, "evt_short_lived")
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM attempts") == 1,
        timeout=30,
        message="event processed",
    )

    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM events WHERE body IS NULL") == 1,
        timeout=30,
        message="its payload pruned by the relay's cleanup",
    )
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM events") == 0,
        timeout=30,
        message="event deleted by the relay's cleanup",
    )
    (warning,) = [line for line in relay.log().splitlines() if "UNSAFE_SHORT" in line]
    assert "less than the retry window of " in warning and "stripe, " in warning
    assert count(runtime, "SELECT count(*) FROM attempts") == 0

    def scrape():
        return requests.get(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).text

    # Counted once the pass's transaction has committed: a moment after the rows go.
    wait_for(
        lambda: exported(scrape(), "hooklatch_cleanup_rows_total", action="deleted") == 1,
        timeout=10,
        message="the deletion counted",
    )
    metrics = scrape()
    assert exported(metrics, "hooklatch_cleanup_rows_total", action="pruned") == 1
    assert exported(metrics, "hooklatch_cleanup_rows_total", action="deleted") == 1
    assert exported(metrics, "hooklatch_cleanup_batch_seconds_count") >= 2
    assert exported(metrics, "hooklatch_cleanup_oldest_expired_seconds") == 0
    # The key went with it: the same id is a new event now.
    assert deliver(client, endpoint, "evt_short_lived") != first


def test_a_relay_refuses_a_dedupe_clock_shorter_than_a_retry_window(procs, proc_settings):
    env = process_env(proc_settings, HOOKLATCH_DEDUPE_RETENTION_DAYS=str(3 * SECONDS))
    relay = procs("relay", hooklatch_cmd("relay"), env)
    assert relay.popen.wait(timeout=30) == 1
    assert "is shorter than provider" in relay.log()
