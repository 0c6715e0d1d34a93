"""`hooklatch reconcile` against Stripe's and GitHub's local API servers: a dry run says
what it would fetch or redeliver and changes nothing, a real run does it, and the exit
code says how the run ended."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from tests.support.database import count
from tests.support.pipeline import drain
from tests.support.provider_apis import STRIPE_KEY, add_github, add_stripe, hook_id_of

INVOICE = {"id": "in_1", "object": "invoice"}


@pytest.fixture
def billing(cli, stripe_api, stripe_key):
    """A Stripe endpoint registered for invoice.paid: its webhook's id."""
    add_stripe(cli, stripe_api, stripe_key, types=["invoice.paid"])
    return hook_id_of(cli, "billing")


def stripe_events(stripe_api, hook_id, *, delivered, lost):
    """Events at Stripe: ``delivered`` reached the endpoint, ``lost`` never did."""
    ids = [
        str(stripe_api.create_event("invoice.paid", INVOICE)["id"]) for _ in range(delivered + lost)
    ]
    for event_id in ids[:delivered]:
        assert stripe_api.deliver(event_id, hook_id) == 200
    return ids[delivered:]


def test_a_dry_run_says_what_it_would_fetch_and_stores_nothing(cli, runtime, stripe_api, billing):
    lost = stripe_events(stripe_api, billing, delivered=2, lost=3)
    dry = cli("reconcile", "billing", "--dry-run")
    assert "(dry run)" in dry.stdout
    assert "found:  3 listed, 3 missing, 0 present" in dry.stdout
    assert "would fetch: 3 (evt_" in dry.stdout and all(event_id in dry.stdout for event_id in lost)
    assert "ended:  finished" in dry.stdout
    assert count(runtime, "SELECT count(*) FROM events") == 2

    everything = json.loads(cli("reconcile", "billing", "--dry-run", "--all", "--json").stdout)
    assert (everything["listed"], everything["missing"], everything["present"]) == (5, 3, 2)
    assert sorted(everything["sample"]) == sorted(lost) and everything["everything"] is True


def test_a_run_fetches_what_was_lost_and_the_next_finds_nothing(cli, runtime, stripe_api, billing):
    lost = stripe_events(stripe_api, billing, delivered=1, lost=2)
    ran = cli("reconcile", "billing")
    assert "did:    2 fetched" in ran.stdout and "cursor: none -> " in ran.stdout
    assert (
        "asked:  what was not delivered since " in ran.stdout and "1 request, 1 page" in ran.stdout
    )
    fetched = count(
        runtime,
        "SELECT count(*) FROM events WHERE origin = 'api' AND verified_by = 'api_call' "
        "AND external_id IN :ids",
        ids=tuple(lost),
    )
    assert fetched == 2
    drain(runtime)  # no handler for invoice.paid: each is marked ignored, none left pending
    assert count(runtime, "SELECT count(*) FROM events WHERE status = 'ignored'") == 3

    again = json.loads(cli("reconcile", "billing", "--since", "2h", "--json").stdout)
    assert (again["status"], again["missing"], again["fetched"]) == ("finished", 0, 0)


def test_a_run_cut_short_by_a_revoked_key_exits_2_and_status_says_why(cli, stripe_api, billing):
    stripe_events(stripe_api, billing, delivered=0, lost=1)
    stripe_api.revoke(STRIPE_KEY)
    cut = cli("reconcile", "billing", ok=False)
    assert cut.exit_code == 2
    assert "ended:  CUT SHORT (unauthorized)" in cut.stdout and "HTTP 401" in cut.stdout
    assert STRIPE_KEY not in cut.output

    status = json.loads(cli("status", "--json", ok=False).stdout)
    [side] = status["provider_sides"]
    assert side["last_run"]["stop_reason"] == "unauthorized" and side["errors_total"] == {
        "unauthorized": 1
    }
    assert any(
        "stripe's API refused its credential (unauthorized)" in p for p in status["problems"]
    )
    screen = cli("status", ok=False).stdout
    assert (
        "cut_short (unauthorized), 0 missing found" in screen
        and "API errors: unauthorized 1" in screen
    )


def test_a_run_under_way_elsewhere_is_a_clear_error(cli, runtime, billing):
    cli("reconcile", "billing", "--dry-run")  # makes the endpoint's reconcile state
    with runtime.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE reconcile_states SET lease_owner = 'relay-host:42:abcd', lease_until = :t"
            ),
            {"t": datetime.now(UTC) + timedelta(hours=1)},
        )
    busy = cli("reconcile", "billing", ok=False)
    assert busy.exit_code == 1
    assert (
        "is under way (relay-host:42:abcd" in busy.output
        and "try again once it ends" in busy.output
    )


def test_since_must_be_a_time_or_a_duration(cli, billing):
    wrong = cli("reconcile", "billing", "--since", "yesterday", ok=False)
    assert wrong.exit_code == 2 and "neither an ISO time nor a duration like 2h" in wrong.output
    long_ago = (datetime.now(UTC) - timedelta(days=60)).replace(tzinfo=None).isoformat()
    at = json.loads(cli("reconcile", "billing", "--since", long_ago, "--dry-run", "--json").stdout)
    assert at["status"] == "finished"  # past the horizon: asked from the horizon, and noted
    assert "reaches back only to" in at["error"]


@pytest.mark.parametrize("given", ["99999999999d", "999999999d"])
def test_a_duration_too_long_for_a_date_is_a_usage_error(cli, billing, given):
    wrong = cli("reconcile", "billing", "--since", given, ok=False)
    assert wrong.exit_code == 2 and "too far back" in wrong.output
    assert "Traceback" not in wrong.output


def test_a_github_run_redelivers_the_failed_deliveries_and_they_arrive_signed(
    cli, runtime, github_api
):
    add_github(cli, github_api)
    hook_id = hook_id_of(cli, "repo")
    github_api.deliver(hook_id, "push", {"ref": "refs/heads/main"})
    failed = [github_api.deliver(hook_id, "push", {"n": n}, fail=True) for n in range(2)]

    dry = cli("reconcile", "repo", "--dry-run")
    assert "found:  3 listed, 2 missing, 0 present" in dry.stdout
    assert "would redeliver: 2 (" in dry.stdout and all(guid in dry.stdout for guid in failed)
    assert github_api.redeliveries(hook_id) == []

    ran = cli("reconcile", "repo")
    assert "did:    2 redeliveries asked for" in ran.stdout
    stored = "SELECT count(*) FROM events WHERE external_id IN :ids"
    assert count(runtime, stored, ids=tuple(failed)) == 2  # each arrived signed, and verified
