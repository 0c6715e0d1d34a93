"""The reconcile's metrics on the web's /metrics: per endpoint with a credential, read from
the totals kept in reconcile_states (so dry runs and deleted runs change no counter), the
last ended run and the drift of the webhook at the provider. The relay's port, which asks
for no token, names no endpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import delete, event, update

from hooklatch.endpoints.models import Endpoint
from hooklatch.operations.backlog import BacklogCollector, read_backlog
from hooklatch.providers.remote import Place
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)
from hooklatch.reconcile.runs import RunRequest, ensure_state
from hooklatch.services.provider_side import check_webhook, reconcile_now, set_credential
from tests.support.fake_github import FakeGitHub
from tests.support.metrics import TOKEN_HEADER, label_values, sample
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.series import exported

MISSING = "hooklatch_reconcile_missing_total"
RUNS = "hooklatch_reconcile_runs_total"
ERRORS = "hooklatch_reconcile_api_errors_total"
STATUS = "hooklatch_reconcile_last_run_status"
SUCCESS = "hooklatch_reconcile_last_success_timestamp_seconds"
INTERVAL = "hooklatch_reconcile_interval_seconds"
DRIFT = "hooklatch_provider_webhook_drift"
SUCCEEDED_AT = datetime(2026, 11, 20, 8, 30, tzinfo=UTC)


def with_credential(runtime, endpoint_id: str) -> None:
    """The endpoint's credential, stored as the services store it (encrypted)."""
    plaintext = json.dumps({"api_key": "rk_test_metrics"})
    with runtime.session_factory.begin() as session:
        session.add(
            EndpointCredential(
                endpoint_id=endpoint_id,
                ciphertext=runtime.box.encrypt(plaintext),
                fields="api_key",
                fingerprint=runtime.box.fingerprint(plaintext),
            )
        )


def with_totals(runtime, endpoint_id: str, **values) -> None:
    """The endpoint's reconcile_states row with these totals, as runs' ends leave it."""
    with runtime.session_factory.begin() as session:
        ensure_state(session, endpoint_id)
        session.execute(
            update(ReconcileState).where(ReconcileState.endpoint_id == endpoint_id).values(**values)
        )


def with_run(runtime, endpoint_id: str, status: str, **columns) -> None:
    """A run's row as it ended (its counts 0 unless given)."""
    with runtime.session_factory.begin() as session:
        session.add(
            ReconcileRun(
                endpoint_id=endpoint_id,
                trigger="schedule",
                requested_by="relay",
                status=status,
                **columns,
            )
        )


def with_hook(runtime, endpoint_id: str, drift: str | None) -> None:
    with runtime.session_factory.begin() as session:
        session.add(ProviderHook(endpoint_id=endpoint_id, hook_id="we_123", drift=drift))


def scrape(runtime, *, per_endpoint: bool = True) -> str:
    """What a new collector serves once it has read the database: the web's (per
    endpoint) or the relay's."""
    registry = CollectorRegistry()
    registry.register(BacklogCollector(runtime, per_endpoint=per_endpoint))
    texts: list[str] = []

    def read() -> bool:
        texts.append(generate_latest(registry).decode())
        return "hooklatch_backlog_age_seconds" in texts[-1]

    wait_for(read, timeout=10, message="the database gauges read")
    return texts[-1]


def series_of(text: str, endpoint: str) -> list[tuple[str, dict[str, str]]]:
    return [
        (item.name, item.labels)
        for family in text_string_to_metric_families(text)
        for item in family.samples
        if item.labels.get("endpoint") == endpoint
    ]


def test_the_totals_of_an_endpoint_with_a_credential_are_its_counters(runtime):
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    with_totals(
        runtime,
        endpoint,
        missing_total=120,
        present_total=50,
        fetched_total=118,
        redeliveries_total=0,
        requests_total=14,
        runs_total=3,
        errors_total={"rate_limited": 2, "unauthorized": 1},
        last_success_at=SUCCEEDED_AT,
    )
    text = scrape(runtime)

    labels = {"endpoint": endpoint, "provider": "stripe"}
    assert exported(text, MISSING, **labels) == 120
    assert exported(text, "hooklatch_reconcile_present_total", **labels) == 50
    assert exported(text, "hooklatch_reconcile_fetched_total", **labels) == 118
    assert exported(text, "hooklatch_reconcile_redeliveries_total", **labels) == 0
    assert exported(text, "hooklatch_reconcile_requests_total", **labels) == 14
    assert exported(text, RUNS, **labels) == 3
    assert exported(text, ERRORS, reason="rate_limited", **labels) == 2
    assert exported(text, ERRORS, reason="unauthorized", **labels) == 1
    # Every reason the contract names is a series from the start, at 0 until it happens.
    assert exported(text, ERRORS, reason="forbidden", **labels) == 0
    assert exported(text, SUCCESS, **labels) == SUCCEEDED_AT.timestamp()
    assert exported(text, INTERVAL, **labels) == runtime.settings.reconcile_interval_seconds


def test_an_endpoint_is_reported_from_its_credential_on_and_only_with_one(runtime):
    fresh, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    with_credential(runtime, fresh)  # no run yet: no state row
    without, _ = make_endpoint(runtime)
    with_totals(runtime, without, missing_total=4, runs_total=1)  # its credential removed
    with_run(runtime, without, "failed")
    with_hook(runtime, without, "disabled")
    text = scrape(runtime)

    labels = {"endpoint": fresh, "provider": "github"}
    assert exported(text, MISSING, **labels) == 0
    assert exported(text, RUNS, **labels) == 0
    assert sample(text, SUCCESS, endpoint=fresh) == 0  # no series: it never succeeded
    assert label_values(text, STATUS, "endpoint") == set()  # no run has ended
    assert label_values(text, DRIFT, "endpoint") == set()  # no webhook at the provider
    assert without not in label_values(text, MISSING, "endpoint")
    assert series_of(text, without) == []


def test_the_last_ended_run_that_was_not_a_dry_run_gives_the_status(runtime):
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    with_run(runtime, endpoint, "failed")
    with_run(runtime, endpoint, "cut_short", stop_reason="unauthorized")
    with_run(runtime, endpoint, "finished", dry_run=True)  # someone checking by hand
    with_run(runtime, endpoint, "running")  # the next, under way
    text = scrape(runtime)

    statuses = {
        labels["status"]: exported(text, STATUS, endpoint=endpoint, status=labels["status"])
        for name, labels in series_of(text, endpoint)
        if name == STATUS
    }
    assert statuses == {"finished": 0, "cut_short": 1, "failed": 0, "interrupted": 0}


def test_dry_runs_change_no_counter(runtime):
    """A dry run finds what a run would, and changes nothing: its counts stay in its own
    row; the totals (what a run that was not dry adds) are the counters."""
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    with_totals(runtime, endpoint, missing_total=2, fetched_total=2, runs_total=1)
    with_run(runtime, endpoint, "finished", missing=2, fetched=2)
    before = scrape(runtime)
    with_run(runtime, endpoint, "finished", dry_run=True, missing=40, present=3, listed=43)
    after = scrape(runtime)

    for name in (MISSING, "hooklatch_reconcile_present_total", RUNS):
        assert exported(after, name, endpoint=endpoint) == exported(before, name, endpoint=endpoint)
    assert exported(after, MISSING, endpoint=endpoint) == 2


def test_counters_never_go_down_when_old_runs_are_deleted(runtime):
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    for _ in range(3):
        with_run(runtime, endpoint, "finished", missing=5, fetched=5, requests=2)
    with_totals(
        runtime, endpoint, missing_total=15, fetched_total=15, requests_total=6, runs_total=3
    )
    before = scrape(runtime)
    with runtime.session_factory.begin() as session:
        session.execute(delete(ReconcileRun).where(ReconcileRun.endpoint_id == endpoint))
    after = scrape(runtime)

    for name in (MISSING, "hooklatch_reconcile_fetched_total", RUNS):
        assert exported(after, name, endpoint=endpoint) == exported(before, name, endpoint=endpoint)
    assert exported(after, MISSING, endpoint=endpoint) == 15
    assert label_values(after, STATUS, "endpoint") == set()  # no run left to say how it ended


def test_each_drift_kind_is_a_series_of_its_own(runtime):
    drifted, _ = make_endpoint(runtime)
    with_credential(runtime, drifted)
    with_hook(runtime, drifted, "disabled,url_changed")
    steady, _ = make_endpoint(runtime)
    with_credential(runtime, steady)
    with_hook(runtime, steady, None)
    text = scrape(runtime)

    def kinds(endpoint: str) -> dict[str, float]:
        return {
            labels["drift"]: exported(text, DRIFT, endpoint=endpoint, drift=labels["drift"])
            for name, labels in series_of(text, endpoint)
            if name == DRIFT
        }

    assert kinds(drifted) == {
        "disabled": 1,
        "url_changed": 1,
        "event_types_changed": 0,
        "deleted": 0,
    }
    assert set(kinds(steady).values()) == {0}


def test_labels_are_escaped_and_take_only_bounded_values(runtime):
    """A provider's name is exported as it is, escaped; the words a plugin's API errors
    or a stored drift carry become no label of their own."""
    endpoint, _ = make_endpoint(runtime)
    odd = 'odd"provider\\with\nbreak'
    with runtime.session_factory.begin() as session:
        session.execute(update(Endpoint).where(Endpoint.id == endpoint).values(provider=odd))
    with_credential(runtime, endpoint)
    stored = {"rate_limited": 1, 'quota "gone"\n': 2, "plugin_said_no": 3}
    with_totals(runtime, endpoint, errors_total=stored)
    with_hook(runtime, endpoint, 'deleted,"evil"')
    text = scrape(runtime)

    assert label_values(text, MISSING, "provider") == {odd}
    assert exported(text, ERRORS, endpoint=endpoint, reason="other") == 5
    assert exported(text, ERRORS, endpoint=endpoint, reason="rate_limited") == 1
    assert label_values(text, ERRORS, "reason") == {
        "unauthorized",
        "forbidden",
        "not_found",
        "rate_limited",
        "server_error",
        "unreachable",
        "bad_answer",
        "invalid",
        "other",
    }
    assert label_values(text, DRIFT, "drift") == {
        "disabled",
        "url_changed",
        "event_types_changed",
        "deleted",
    }
    assert exported(text, DRIFT, endpoint=endpoint, drift="deleted") == 1


def test_a_disabled_endpoint_keeps_its_counters_and_has_no_schedule(runtime, app_with):
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    with_totals(runtime, endpoint, missing_total=7, runs_total=2)
    with runtime.session_factory.begin() as session:
        session.execute(update(Endpoint).where(Endpoint.id == endpoint).values(enabled=False))
    text = scrape(runtime)
    assert exported(text, MISSING, endpoint=endpoint) == 7
    assert label_values(text, INTERVAL, "endpoint") == set()

    by_hand = app_with(reconcile_interval_seconds=0.0).extensions["hooklatch"]
    with runtime.session_factory.begin() as session:
        session.execute(update(Endpoint).where(Endpoint.id == endpoint).values(enabled=True))
    assert label_values(scrape(by_hand), INTERVAL, "endpoint") == set()
    assert label_values(scrape(runtime), INTERVAL, "endpoint") == {endpoint}


def test_the_web_serves_them_and_the_relay_does_not(app_with, runtime):
    endpoint, _ = make_endpoint(runtime)
    with_credential(runtime, endpoint)
    with_totals(runtime, endpoint, missing_total=3, runs_total=1)
    client = app_with(metrics_cache_seconds=0.05).test_client()

    def served() -> str:
        return client.get("/metrics", headers=TOKEN_HEADER).get_data(as_text=True)

    wait_for(lambda: sample(served(), MISSING, endpoint=endpoint) == 3, timeout=10)
    relay = scrape(runtime, per_endpoint=False)
    assert "hooklatch_outbox_waiting_rows" in relay
    assert "hooklatch_reconcile" not in relay
    assert endpoint not in relay


def test_a_read_of_the_gauges_costs_one_query_more_whatever_the_endpoints(runtime):
    for n in range(30):
        endpoint, _ = make_endpoint(runtime)
        with_credential(runtime, endpoint)
        with_totals(runtime, endpoint, missing_total=n, runs_total=2)
        with_hook(runtime, endpoint, "disabled" if n % 2 else None)
        with_run(runtime, endpoint, "finished")
        with_run(runtime, endpoint, "cut_short")
    statements: list[str] = []

    def counted(*args: object) -> None:
        statements.append(str(args[2]))

    event.listen(runtime.engine, "before_cursor_execute", counted)
    try:
        read_backlog(runtime)
        without = len(statements)
        statements.clear()
        read = read_backlog(runtime, per_endpoint=True)
    finally:
        event.remove(runtime.engine, "before_cursor_execute", counted)
    assert len(statements) == without + 1, statements
    assert len(read.reconcile) == 30
    assert {item.last_status for item in read.reconcile} == {"cut_short"}


def test_the_counters_are_read_on_sqlite_too(settings, tmp_path):
    """The embedded default serves /metrics from SQLite."""
    from hooklatch.assembly import build_runtime
    from tests.support.database import sqlite_settings

    runtime = build_runtime(sqlite_settings(settings, tmp_path / "db"))
    try:
        endpoint, _ = make_endpoint(runtime)
        with_credential(runtime, endpoint)
        with_totals(runtime, endpoint, missing_total=9, runs_total=1, last_success_at=SUCCEEDED_AT)
        with_run(runtime, endpoint, "finished")
        with_run(runtime, endpoint, "running")
        text = scrape(runtime)
        assert exported(text, MISSING, endpoint=endpoint) == 9
        assert exported(text, STATUS, endpoint=endpoint, status="finished") == 1
        assert exported(text, SUCCESS, endpoint=endpoint) == SUCCEEDED_AT.timestamp()
    finally:
        runtime.dispose()


# End to end: runs of the real reconcile against FakeGitHub, a local server that answers
# as GitHub's REST API description says, and what the metrics then say.

TOKEN = "ghp_metrics_test_token_0123456789"
SCOPE = "repos/acme/metrics"


@pytest.fixture
def github(client):
    """FakeGitHub, its deliveries posted to the app's ingest view."""
    with FakeGitHub(
        send=lambda url, headers, body: (
            client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code
        )
    ) as fake:
        fake.add_token(TOKEN)
        yield fake


def linked(runtime, github) -> tuple[str, int]:
    """A GitHub endpoint whose hook someone made at GitHub, linked with a token."""
    endpoint, [secret] = make_endpoint(runtime, "github", secrets=["gh-metrics-secret"])
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    hook_id = github.add_hook(SCOPE, url, secret=secret)
    place = Place(api_url=github.url, scope=SCOPE, hook_id=str(hook_id))
    set_credential(runtime, endpoint, {"token": TOKEN}, actor="test", place=place)
    return endpoint, hook_id


def reconcile(runtime, endpoint: str, *, dry_run: bool = False) -> dict:
    request = RunRequest(trigger="cli", requested_by="test", dry_run=dry_run)
    return reconcile_now(runtime, endpoint, request)


def test_runs_against_github_count_what_they_found_and_a_dry_run_only_its_requests(runtime, github):
    endpoint, hook_id = linked(runtime, github)
    for n in range(3):
        github.deliver(hook_id, "push", {"ref": f"refs/heads/lost{n}"}, fail=True)
    github.deliver(hook_id, "push", {"ref": "refs/heads/kept"})

    dry = reconcile(runtime, endpoint, dry_run=True)
    assert (dry["status"], dry["missing"]) == ("finished", 3)
    text = scrape(runtime)
    assert exported(text, MISSING, endpoint=endpoint) == 0
    assert exported(text, RUNS, endpoint=endpoint) == 0
    assert exported(text, "hooklatch_reconcile_requests_total", endpoint=endpoint) == 1
    assert label_values(text, STATUS, "endpoint") == set()
    assert sample(text, SUCCESS, endpoint=endpoint) == 0

    run = reconcile(runtime, endpoint)
    assert (run["status"], run["redeliveries"]) == ("finished", 3)
    text = scrape(runtime)
    labels = {"endpoint": endpoint, "provider": "github"}
    assert exported(text, MISSING, **labels) == 3
    assert exported(text, "hooklatch_reconcile_redeliveries_total", **labels) == 3
    assert exported(text, "hooklatch_reconcile_fetched_total", **labels) == 0
    assert exported(text, RUNS, **labels) == 1
    assert exported(text, "hooklatch_reconcile_requests_total", **labels) == 1 + 1 + 3
    assert exported(text, STATUS, status="finished", **labels) == 1
    assert exported(text, SUCCESS, **labels) > 0

    github.revoke(TOKEN)
    refused = reconcile(runtime, endpoint)
    assert (refused["status"], refused["stop_reason"]) == ("cut_short", "unauthorized")
    text = scrape(runtime)
    assert exported(text, ERRORS, reason="unauthorized", **labels) == 1
    assert exported(text, STATUS, status="cut_short", **labels) == 1
    assert exported(text, STATUS, status="finished", **labels) == 0
    assert exported(text, MISSING, **labels) == 3


def test_a_hook_disabled_at_github_shows_as_drift_once_read_back(runtime, github):
    endpoint, hook_id = linked(runtime, github)
    check_webhook(runtime, endpoint)
    assert exported(scrape(runtime), DRIFT, endpoint=endpoint, drift="disabled") == 0

    github.change_hook(hook_id, active=False)
    check_webhook(runtime, endpoint)
    text = scrape(runtime)
    assert exported(text, DRIFT, endpoint=endpoint, drift="disabled") == 1
    assert exported(text, DRIFT, endpoint=endpoint, drift="url_changed") == 0
