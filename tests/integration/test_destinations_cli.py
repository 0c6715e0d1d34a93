"""`hooklatch destinations`: added with their secret settings typed at hidden prompts or
read from stdin or a file (never an option's value), listed, shown, changed, paused and
resumed, removed, their forwards replayed. A secret setting is in no output, log record or
audit row, and in the stored row only encrypted."""

from __future__ import annotations

import json
import logging

import pytest

from tests.integration.test_destinations_api import (
    HTTP_URL,
    NATS_URL,
    ROTATED_SECRET,
    ROTATED_URL,
    SECRET_PARTS,
    SECRETS,
    SIGNING_SECRET,
    assert_encrypted_only,
    audit_actions,
    forward_states,
    seed_forwards,
)
from tests.support.cli import run_cli
from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint
from tests.support.provider_apis import stored_nowhere

HTTP_TYPED = f"{HTTP_URL}\n{SIGNING_SECRET}\n"
NATS_LINES = f"# the broker, with its password\nurl={NATS_URL}\n"


@pytest.fixture
def cli(settings):
    def run(*args: str, ok: bool = True, input: str | None = None):
        return run_cli(settings, "destinations", *args, ok=ok, input=input)

    return run


def shown(cli, ref: str) -> dict:
    return json.loads(cli("show", ref, "--json").stdout)


def test_add_asks_for_the_secret_settings_at_hidden_prompts_and_prints_none(cli, runtime, caplog):
    caplog.set_level(logging.DEBUG)
    endpoint, _ = make_endpoint(runtime, name="billing")

    added = cli(
        "add", "warehouse", "--kind", "http", "--endpoint", "billing",
        "--types", "invoice.*, charge.failed", "--rate-limit", "5", input=HTTP_TYPED,
    )  # fmt: skip

    assert "http url (input hidden)" in added.output
    assert "http signing_secret (input hidden)" in added.output
    data = shown(cli, "warehouse")
    assert f"destination {data['id']} (http, warehouse)" in added.stdout
    assert (
        f"connection: https://hooks.example.net/in (secrets' fingerprint {data['fingerprint']})"
        in added.stdout
    )
    assert f"forwards: endpoint {endpoint}, types invoice.*,charge.failed" in added.stdout
    assert "rate limit: 5 a second" in added.stdout
    assert data["filter"] == {
        "endpoint_id": endpoint,
        "provider": None,
        "types": ["invoice.*", "charge.failed"],
    }
    assert data["settings"] == {} and data["forwards"]["pending"] == 0
    assert_encrypted_only(runtime)
    assert audit_actions(runtime) == ["destination.added"]
    with runtime.engine.connect() as connection:
        [actor] = [a for (a,) in connection.exec_driver_sql("SELECT actor FROM audit_log")]
    assert actor.endswith("(cli)")
    stored_nowhere(runtime, SECRETS + SECRET_PARTS, added.stdout, caplog.text)


def test_plain_settings_come_with_set_and_secret_ones_from_stdin_or_a_file(
    cli, runtime, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    from_stdin = cli(
        "add", "orders-bus", "--kind", "nats", "--set", "subject=hooks.orders",
        "--secrets-from-stdin", "--provider", "stripe", "--json", input=NATS_LINES,
    )  # fmt: skip
    secrets_file = tmp_path / "secrets"
    secrets_file.write_text(f"url={HTTP_URL}\nsigning_secret={SIGNING_SECRET}\n")
    from_file = cli("add", "warehouse", "--kind", "http", "--secrets-file", str(secrets_file))

    data = json.loads(from_stdin.stdout)
    assert data["settings"] == {"subject": "hooks.orders"}
    assert data["filter"]["provider"] == "stripe"
    assert "nats.example.net" in data["connection"]
    assert "input hidden" not in from_stdin.output + from_file.output
    assert shown(cli, "warehouse")["connection"] == "https://hooks.example.net/in"
    assert_encrypted_only(runtime)
    stored_nowhere(
        runtime, SECRETS + SECRET_PARTS, from_stdin.output, from_file.output, caplog.text
    )


def test_a_secret_setting_on_the_command_line_is_refused(cli, runtime):
    refused = cli(
        "add", "warehouse", "--kind", "http", "--set", f"url={HTTP_URL}", ok=False,
        input=HTTP_TYPED,
    )  # fmt: skip

    assert refused.exit_code == 2
    assert "url is a secret setting" in refused.output
    assert HTTP_URL not in refused.output
    assert count(runtime, "SELECT count(*) FROM destinations") == 0


def test_list_shows_a_table_and_json(cli, runtime):
    assert "no destinations" in cli("list").stdout
    cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED)
    cli("add", "orders-bus", "--kind", "nats", "--set", "subject=s", "--secrets-from-stdin",
        input=NATS_LINES)  # fmt: skip
    cli("pause", "orders-bus")

    table = cli("list").stdout.splitlines()
    listed = json.loads(cli("list", "--json").stdout)

    assert table[0].split() == [
        "NAME", "KIND", "CONNECTION", "FILTER", "PAUSED", "PENDING", "DEAD", "OLDEST", "DELIVERED"
    ]  # fmt: skip
    assert table[1].split()[:2] == ["orders-bus", "nats"] and " yes " in table[1]
    assert table[2].split()[:3] == ["warehouse", "http", "https://hooks.example.net/in"]
    assert "every event" in table[2]
    assert [d["name"] for d in listed] == ["orders-bus", "warehouse"]
    assert listed[0]["paused"] is True and listed[1]["forwards"]["dead"] == 0
    stored_nowhere(runtime, SECRETS + SECRET_PARTS, "\n".join(table), json.dumps(listed))


def test_change_sets_the_filter_rate_limit_and_all_the_settings_again(cli, runtime, caplog):
    caplog.set_level(logging.DEBUG)
    make_endpoint(runtime, name="billing")
    cli("add", "warehouse", "--kind", "http", "--endpoint", "billing", "--types", "invoice.*",
        input=HTTP_TYPED)  # fmt: skip
    before = shown(cli, "warehouse")

    outputs = [
        cli("change", "warehouse", "--types", "charge.*", "--rate-limit", "2.5").stdout,
        cli("change", before["id"], "--endpoint", "", "--no-rate-limit").stdout,
        cli(
            "change", "warehouse", "--new-settings", input=f"{ROTATED_URL}\n{ROTATED_SECRET}\n"
        ).output,
    ]

    after = shown(cli, "warehouse")
    assert "rate limit: 2.5 a second" in outputs[0]
    assert "forwards: types charge.*" in outputs[1] and "rate limit: none" in outputs[1]
    assert after["filter"] == {"endpoint_id": None, "provider": None, "types": ["charge.*"]}
    assert after["rate_limit"] is None
    assert after["connection"] == "https://hooks.example.net/v2"
    assert after["fingerprint"] != before["fingerprint"]
    assert audit_actions(runtime) == ["destination.added"] + ["destination.changed"] * 3
    assert_encrypted_only(runtime)
    stored_nowhere(runtime, SECRETS + SECRET_PARTS, *outputs, caplog.text)


def test_change_of_a_plain_setting_takes_the_secret_ones_again(cli, runtime):
    cli("add", "orders-bus", "--kind", "nats", "--set", "subject=old", "--secrets-from-stdin",
        input=NATS_LINES)  # fmt: skip

    without = cli("change", "orders-bus", "--set", "subject=new", "--secrets-from-stdin",
                  input="# nothing\n", ok=False)  # fmt: skip
    changed = cli("change", "orders-bus", "--set", "subject=new", "--secrets-from-stdin",
                  input=NATS_LINES)  # fmt: skip

    assert without.exit_code == 2 and "no secret settings were given" in without.output
    assert "settings: subject=new" in changed.stdout
    assert shown(cli, "orders-bus")["settings"] == {"subject": "new"}


def test_pause_resume_and_remove_each_write_their_audit_entry(cli, runtime):
    cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED)
    data = shown(cli, "warehouse")

    paused = cli("pause", "warehouse").stdout
    again = cli("pause", "warehouse").stdout
    resumed = cli("resume", data["id"]).stdout
    kept = cli("remove", "warehouse", input="n\n", ok=False)
    removed = cli("remove", "warehouse", input="y\n")

    assert f"destination {data['id']} (warehouse) paused" in paused
    assert "was paused already" in again
    assert "resumed" in resumed
    assert kept.exit_code == 1 and "Aborted" in kept.output
    assert "(0 waiting, never to be sent)" in removed.output
    assert f"destination {data['id']} (warehouse) removed" in removed.stdout
    assert count(runtime, "SELECT count(*) FROM destinations") == 0
    assert audit_actions(runtime) == [
        "destination.added",
        "destination.paused",
        "destination.resumed",
        "destination.removed",
    ]


def test_remove_with_yes_asks_nothing(cli, runtime):
    cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED)

    removed = cli("remove", "warehouse", "--yes")

    assert "?" not in removed.output and "removed" in removed.stdout
    assert count(runtime, "SELECT count(*) FROM destinations") == 0


# Refusals: one line saying why, exit 1, nothing stored or audited.


@pytest.mark.parametrize(
    ("args", "input", "said"),
    [
        (("--kind", "carrier-pigeon"), None, "carrier-pigeon"),
        (("--kind", "http", "--secrets-from-stdin"), f"url={HTTP_URL}\n", "signing_secret"),
        (("--kind", "nats", "--secrets-from-stdin"), NATS_LINES, "subject"),
        (("--kind", "http", "--rate-limit", "0"), HTTP_TYPED, "a rate limit is"),
        (("--kind", "http", "--rate-limit", "-3"), HTTP_TYPED, "a rate limit is"),
        (("--kind", "http", "--endpoint", "nosuch"), HTTP_TYPED, "no endpoint 'nosuch'"),
    ],
)
def test_a_destination_refused_is_not_stored(cli, runtime, args, input, said, caplog):
    caplog.set_level(logging.DEBUG)
    refused = cli("add", "warehouse", *args, input=input, ok=False)

    assert refused.exit_code == 1, refused.output
    assert "Error: " in refused.output and said in refused.output
    assert count(runtime, "SELECT count(*) FROM destinations") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0
    stored_nowhere(runtime, SECRETS + SECRET_PARTS, refused.output, caplog.text)


def test_a_rate_limit_that_is_not_a_finite_number_is_a_usage_error(cli, runtime):
    for given in ("inf", "fast"):
        refused = cli("add", "warehouse", "--kind", "http", "--rate-limit", given, ok=False,
                      input=HTTP_TYPED)  # fmt: skip
        assert refused.exit_code == 2
    assert count(runtime, "SELECT count(*) FROM destinations") == 0


def test_a_second_destination_of_the_same_name_is_refused(cli, runtime):
    cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED)

    again = cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED, ok=False)

    assert again.exit_code == 1 and "a destination is named 'warehouse' already" in again.output
    assert count(runtime, "SELECT count(*) FROM destinations") == 1


@pytest.mark.parametrize(
    "args",
    [
        ("show", "nosuch"),
        ("change", "nosuch", "--rate-limit", "1"),
        ("pause", "nosuch"),
        ("resume", "nosuch"),
        ("remove", "nosuch", "--yes"),
        ("replay", "nosuch", "--dry-run"),
    ],
)
def test_an_unknown_destination_is_said_by_every_command(cli, args):
    refused = cli(*args, ok=False)

    assert refused.exit_code == 1
    assert "Error: no destination 'nosuch'" in refused.output


def test_change_refuses_a_bad_rate_limit_and_nothing_to_change(cli, runtime):
    cli("add", "warehouse", "--kind", "http", "--rate-limit", "3", input=HTTP_TYPED)

    zero = cli("change", "warehouse", "--rate-limit", "0", ok=False)
    both = cli("change", "warehouse", "--rate-limit", "1", "--no-rate-limit", ok=False)
    nothing = cli("change", "warehouse", ok=False)

    assert zero.exit_code == 1 and "a rate limit is" in zero.output
    assert both.exit_code == nothing.exit_code == 2
    assert shown(cli, "warehouse")["rate_limit"] == 3
    assert audit_actions(runtime) == ["destination.added"]


# Replays.


@pytest.fixture
def replayable(cli, client, runtime):
    """A destination with forwards of four events: two dead (invoice.paid, charge.failed),
    one delivered, one pending. Returns its id and the events' ids."""
    endpoint, _ = make_endpoint(runtime, name="billing")
    types = ["invoice.paid", "charge.failed", "invoice.paid", "invoice.paid"]
    events = [deliver(client, endpoint, f"evt_{n}", event_type=t) for n, t in enumerate(types)]
    cli("add", "warehouse", "--kind", "http", input=HTTP_TYPED)
    destination = shown(cli, "warehouse")["id"]
    statuses = ["dead", "dead", "delivered", "pending"]
    seed_forwards(runtime, destination, dict(zip(events, statuses, strict=True)))
    return destination, events


def test_replay_dry_run_counts_and_the_real_one_sets_forwards_pending_again(
    cli, runtime, replayable
):
    """Forwards are seeded by SQL: the subject is which forwards a replay chooses and what
    it does to them, not how they came to be."""
    destination, events = replayable
    before = forward_states(runtime, destination)

    dry = cli("replay", "warehouse", "--dry-run").stdout
    needs_reason = cli("replay", "warehouse", ok=False)
    assert "warehouse: 2 forwards match; dry run, none replayed" in dry
    assert needs_reason.exit_code == 2 and "--reason is required" in needs_reason.output
    assert forward_states(runtime, destination) == before

    one_type = cli("replay", "warehouse", "--type", "invoice.*", "--reason", "back up").stdout
    by_event = cli(
        "replay", destination, "--status", "delivered", "--status", "dead",
        "--event", str(events[2]), "--reason", "lost downstream", "--json",
    ).stdout  # fmt: skip
    later = cli("replay", "warehouse", "--since", "2999-01-01T00:00:00Z", "--dry-run").stdout

    assert "warehouse: 1 matched, 1 replayed" in one_type
    assert (json.loads(by_event)["matched"], json.loads(by_event)["replayed"]) == (1, 1)
    assert "0 forwards match" in later
    after = forward_states(runtime, destination)
    assert after[events[0]] == after[events[2]] == ("pending", 0, None)
    assert after[events[1]] == ("dead", 7, "connection refused")  # charge.failed
    assert after[events[3]] == before[events[3]]
    assert audit_actions(runtime) == ["destination.added"] + ["destination.replayed"] * 2


def test_replay_refuses_a_time_that_is_not_iso_8601(cli, replayable):
    refused = cli("replay", "warehouse", "--since", "yesterday", "--dry-run", ok=False)

    assert refused.exit_code == 2 and "ISO 8601" in refused.output
