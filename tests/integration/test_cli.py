"""The `hooklatch` command: endpoints, secrets rotation, events and replay."""

import json
import time

import pytest
from click.testing import CliRunner

from hooklatch.cli import main
from tests.support.database import count
from tests.support.pipeline import drain
from tests.support.signing import github_headers, stripe_event, stripe_headers


@pytest.fixture
def cli(settings):
    env = {
        "DATABASE_URL": settings.database_url,
        "HOOKLATCH_SECRET_KEYS": ",".join(settings.secret_keys),
        "HOOKLATCH_PUBLIC_URL": "https://hooks.example.com",
        "REDIS_URL": settings.redis_url,
        "HOOKLATCH_QUEUE": settings.queue_name,
    }

    def run(*args, ok=True):
        result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
        if ok:
            assert result.exit_code == 0, result.output
        return result

    return run


def post_github(client, endpoint, secret, body=b'{"ref": "main"}'):
    return client.post(f"/hooks/{endpoint}", data=body, headers=github_headers(body, secret))


def test_endpoints_add_prints_the_url_and_a_generated_secret_for_github(cli):
    created = json.loads(cli("endpoints", "add", "github", "--name", "repo", "--json").output)
    assert created["url"] == f"https://hooks.example.com/hooks/{created['id']}"
    [secret] = created["secret_values"]
    assert len(secret) >= 40
    listed = cli("endpoints", "list").output
    assert created["id"] in listed and secret not in listed
    shown = cli("endpoints", "show", "repo").output
    assert secret not in shown
    assert secret in cli("endpoints", "show", "repo", "--reveal").output


def test_stripe_endpoint_refuses_deliveries_until_the_secret_stripe_shows_is_added(cli, client):
    # Stripe shows the signing secret only after it has the URL: create first, add the secret.
    created = json.loads(cli("endpoints", "add", "stripe", "--name", "billing", "--json").output)
    assert created["secrets"] == [] and "secret_values" not in created
    body = stripe_event("evt_before_secret")
    headers = stripe_headers(body, "whsec_from_dashboard")
    refused = client.post(f"/hooks/{created['id']}", data=body, headers=headers)
    assert (refused.status_code, refused.json["error"]) == (401, "no_secret")

    cli("endpoints", "secrets", "add", "billing", "--secret", "whsec_from_dashboard")
    shown = cli("endpoints", "show", "billing").output
    assert "whsec_from_dashboard" not in shown  # a secret the user gave is not echoed back
    assert client.post(f"/hooks/{created['id']}", data=body, headers=headers).status_code == 200


def test_keys_generate_needs_no_configuration():
    result = CliRunner().invoke(
        main, ["keys", "generate"], env={"DATABASE_URL": "postgresql://x/y"}
    )
    assert result.exit_code == 0
    assert len(result.output.strip()) == 44


def test_keys_rotate_reencrypts_secrets_so_the_old_key_can_go(cli, settings, client):
    from cryptography.fernet import Fernet

    created = json.loads(cli("endpoints", "add", "github", "--name", "rekeyed", "--json").output)
    secret = created["secret_values"][0]
    new_key = Fernet.generate_key().decode()
    old_key = settings.secret_keys[0]
    env = {"DATABASE_URL": settings.database_url, "HOOKLATCH_SECRET_KEYS": f"{new_key},{old_key}"}
    assert CliRunner().invoke(main, ["keys", "rotate"], env=env).exit_code == 0
    env["HOOKLATCH_SECRET_KEYS"] = new_key
    shown = CliRunner().invoke(main, ["endpoints", "show", "rekeyed", "--reveal"], env=env)
    assert shown.exit_code == 0 and secret in shown.output
    # The app still running on the old key alone cannot read it: a clear, retryable 503.
    response = post_github(client, created["id"], secret)
    assert (response.status_code, response.json["error"]) == (503, "secret_unavailable")


def test_unknown_provider_is_a_clear_error(cli):
    result = cli("endpoints", "add", "nosuch", "--name", "x", ok=False)
    assert result.exit_code == 1
    assert "provider 'nosuch' is not installed" in result.output


def test_two_secrets_both_verify_and_a_removed_one_fails(cli, client):
    created = json.loads(cli("endpoints", "add", "github", "--name", "rotating", "--json").output)
    old = created["secret_values"][0]
    old_fingerprint = created["secrets"][0]["fingerprint"]
    cli("endpoints", "secrets", "add", "rotating", "--secret", "the-new-secret")

    assert post_github(client, created["id"], old).status_code == 200
    assert post_github(client, created["id"], "the-new-secret").status_code == 200

    cli("endpoints", "secrets", "remove", "rotating", old_fingerprint)
    refused = post_github(client, created["id"], old)
    assert (refused.status_code, refused.json["error"]) == (401, "bad_signature")
    assert post_github(client, created["id"], "the-new-secret").status_code == 200


def test_the_last_secret_cannot_be_removed(cli):
    created = json.loads(cli("endpoints", "add", "github", "--name", "single", "--json").output)
    result = cli(
        "endpoints", "secrets", "remove", "single", str(created["secrets"][0]["id"]), ok=False
    )
    assert result.exit_code == 1
    assert "only secret" in result.output


def test_stripe_roll_header_with_old_and_new_signatures_verifies(cli, client):
    created = json.loads(
        cli(
            "endpoints", "add", "stripe", "--name", "rolled", "--secret", "whsec_new", "--json"
        ).stdout
    )
    body = stripe_event("evt_roll")
    headers = stripe_headers(body, "whsec_old", extra_secrets=["whsec_new"])
    response = client.post(f"/hooks/{created['id']}", data=body, headers=headers)
    assert response.status_code == 200


def test_disabled_endpoint_answers_404(cli, client):
    created = json.loads(cli("endpoints", "add", "github", "--name", "off", "--json").output)
    cli("endpoints", "disable", "off")
    assert post_github(client, created["id"], created["secret_values"][0]).status_code == 404


def test_events_list_show_and_replay_from_the_cli(cli, client, runtime):
    created = json.loads(cli("endpoints", "add", "github", "--name", "events", "--json").output)
    response = post_github(client, created["id"], created["secret_values"][0])
    event_id = response.json["events"][0]["id"]
    drain(runtime)
    assert "ignored" in cli("events", "list").output
    shown = json.loads(cli("events", "show", str(event_id)).output)
    assert shown["status"] == "ignored"
    replay = json.loads(
        cli("events", "replay", str(event_id), "--reason", "handler added", "--by", "bob").output
    )
    assert replay["status"] == "pending" and replay["requested_by"] == "bob (cli)"
    drain(runtime)
    assert count(runtime, "SELECT count(*) FROM replays WHERE status = 'succeeded'") == 1
    assert cli("events", "show", "424242", ok=False).exit_code == 1


@pytest.mark.parametrize("limit", ["-1", "0", "100000"])
def test_events_list_refuses_a_limit_out_of_range(cli, limit):
    """A negative limit lists every row on SQLite and fails on PostgreSQL."""
    result = cli("events", "list", "--limit", limit, ok=False)
    assert result.exit_code == 2
    assert "--limit" in result.output


def test_missing_secret_keys_with_a_database_url_fails_fast(settings):
    result = CliRunner().invoke(
        main,
        ["endpoints", "list"],
        env={"DATABASE_URL": settings.database_url, "HOOKLATCH_SECRET_KEYS": ""},
    )
    assert result.exit_code == 1
    assert "HOOKLATCH_SECRET_KEYS is required" in result.output


def test_refused_deliveries_are_counted_by_reason_in_endpoints_show(cli, client, caplog):
    created = json.loads(
        cli(
            "endpoints", "add", "stripe", "--name", "counted", "--secret", "whsec_a", "--json"
        ).stdout
    )
    body = stripe_event("evt_counted")
    for _ in range(3):  # signed with a secret the endpoint does not have
        headers = stripe_headers(body, "whsec_rotated_away")
        assert client.post(f"/hooks/{created['id']}", data=body, headers=headers).status_code == 401
    stale = stripe_headers(body, "whsec_a", timestamp=int(time.time()) - 3600)
    assert client.post(f"/hooks/{created['id']}", data=body, headers=stale).status_code == 401

    shown = json.loads(cli("endpoints", "show", "counted").output)
    assert {r["reason"]: r["count"] for r in shown["refused"]} == {
        "bad_signature": 3,
        "stale_timestamp": 1,
    }
    logged = [r.getMessage() for r in caplog.records if "refused delivery" in r.getMessage()]
    assert any("timestamp_skew_seconds 36" in line for line in logged), logged
    assert any("active_secrets 1; provider stripe; scheme t= and 1 v1=" in x for x in logged)
    assert all("whsec_a" not in line and "whsec_rotated_away" not in line for line in logged)


def test_an_unknown_provider_option_is_refused_by_name(cli):
    result = cli("endpoints", "add", "stripe", "--name", "opt", "--option", "colour=red", ok=False)
    assert result.exit_code == 1
    assert "stripe has no option 'colour'" in result.output
