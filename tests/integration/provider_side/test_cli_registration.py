"""The CLI's provider side against Stripe's and GitHub's local API servers: registering an
endpoint's URL, its credential, removing it with or without its webhook, and drift in
`endpoints show` and `status`. Neither the signing secret nor the credential is ever
printed, logged or audited."""

import json
import logging
import sys

import pytest

from tests.support.cli import cli_env
from tests.support.database import count
from tests.support.provider_apis import (
    GITHUB_TOKEN,
    SCOPE,
    STRIPE_KEY,
    add_github,
    add_stripe,
    credential_file,
    endpoint_of,
    hook_id_of,
    read_at,
    stored_nowhere,
)
from tests.support.rsa_keys import rsa_key_pair
from tests.support.terminal import run_in_terminal

# Registering.


def test_add_register_gives_stripe_the_url_and_types_and_keeps_its_secret_unseen(
    cli, runtime, stripe_api, stripe_key, live, caplog
):
    caplog.set_level(logging.DEBUG)
    added = add_stripe(cli, stripe_api, stripe_key)
    shown = endpoint_of(cli, "billing")
    hook_id = shown["provider_side"]["webhook"]["hook_id"]
    at_stripe = stripe_api.endpoint(hook_id)
    assert at_stripe["url"] == f"{live}/hooks/{shown['id']}" == shown["url"]
    assert at_stripe["enabled_events"] == ["invoice.paid", "customer.created"]
    assert f"registered with stripe: {hook_id} for {shown['url']}" in added.stdout
    assert "(invoice.paid, customer.created), enabled" in added.stdout
    assert "the signing secret stripe returned is stored (fingerprint" in added.stdout
    [secret] = shown["secrets"]
    assert secret["fingerprint"] in added.stdout

    event = stripe_api.create_event("invoice.paid", {"id": "in_1", "object": "invoice"})
    assert stripe_api.deliver(str(event["id"]), hook_id) == 200  # signed with Stripe's secret
    verified = "SELECT count(*) FROM events WHERE external_id = :e AND verified_by = 'signature'"
    assert count(runtime, verified, e=event["id"]) == 1

    signing = stripe_api.secret_of(hook_id)
    stored_nowhere(runtime, [signing, STRIPE_KEY], added.output, caplog.text)


def test_add_register_json_carries_the_provider_side_and_no_secret(
    cli, runtime, stripe_api, stripe_key
):
    data = json.loads(
        add_stripe(cli, stripe_api, stripe_key, "--json", types=["charge.failed"]).stdout
    )
    webhook = data["provider_side"]["webhook"]
    assert webhook["event_types"] == ["charge.failed"] and webhook["drift"] == []
    assert data["provider_side"]["credential"]["fields"] == ["api_key"]
    assert "secret_values" not in data
    stored_nowhere(
        runtime, [stripe_api.secret_of(webhook["hook_id"]), STRIPE_KEY], json.dumps(data)
    )


def test_add_register_with_github_asks_for_a_token_only_and_signs_with_a_secret_made_here(
    cli, runtime, github_api, live, caplog
):
    caplog.set_level(logging.DEBUG)
    added = add_github(cli, github_api)
    assert "github token (input hidden; empty to leave it out)" in added.output
    assert "app_id (input" not in added.output  # a token is a whole credential
    shown = endpoint_of(cli, "repo")
    hook = github_api.hook(shown["provider_side"]["webhook"]["hook_id"])
    assert (hook.scope, hook.url, hook.events) == (
        SCOPE,
        f"{live}/hooks/{shown['id']}",
        ["push", "issues"],
    )
    assert "the signing secret hooklatch made and gave github is stored" in added.stdout

    guid = github_api.deliver(hook.id, "push", {"ref": "refs/heads/main"})
    assert github_api.deliveries(hook.id)[0].status_code == 200
    assert count(runtime, "SELECT count(*) FROM events WHERE external_id = :g", g=guid) == 1
    stored_nowhere(runtime, [hook.secret, GITHUB_TOKEN], added.output, caplog.text)


def test_a_registration_the_provider_refuses_leaves_the_endpoint_and_says_how_to_retry(
    cli, stripe_api, stripe_key, tmp_path
):
    wrong = credential_file(tmp_path, "api_key=rk_test_51HnotKnownHereAtAll\n")
    refused = cli(
        "endpoints", "add", "stripe", "--name", "billing", "--register",
        "--api-url", stripe_api.url, "--credential-file", wrong, ok=False,
    )  # fmt: skip
    assert refused.exit_code == 1
    assert "(HTTP 401)" in refused.output
    assert "`hooklatch endpoints register billing` succeeds" in refused.output
    assert "rk_test_51HnotKnownHereAtAll" not in refused.output
    assert endpoint_of(cli, "billing")["secrets"] == []  # it refuses every delivery

    cli("endpoints", "credential", "set", "billing", "--credential-file", stripe_key)
    registered = cli("endpoints", "register", "billing", "--event-type", "invoice.paid")
    assert "registered with stripe: we_" in registered.stdout
    assert len(stripe_api.requests) == 2  # the refused creation, then this one


def test_register_options_need_register_and_register_takes_no_secret(cli, stripe_key):
    alone = cli("endpoints", "add", "stripe", "--name", "a", "--event-type", "x.y", ok=False)
    assert alone.exit_code == 2 and "go with --register" in alone.output
    both = cli(
        "endpoints", "add", "stripe", "--name", "b", "--register", "--secret", "whsec_x", ok=False
    )
    assert both.exit_code == 2 and "--register takes no --secret" in both.output


# The credential.


def test_credential_set_show_rotate_and_remove_never_print_it(cli, runtime, stripe_key, caplog):
    caplog.set_level(logging.DEBUG)
    cli("endpoints", "add", "stripe", "--name", "billing")
    outputs = [
        cli("endpoints", "credential", "set", "billing", "--credential-file", stripe_key).output
    ]
    assert "billing: credential set" in outputs[0]
    first = cli.json("endpoints", "credential", "show", "billing")
    assert first["fields"] == ["api_key"] and len(first["fingerprint"]) >= 12
    outputs.append(cli("endpoints", "credential", "show", "billing").output)
    assert f"credential: api_key (fingerprint {first['fingerprint']}, set " in outputs[-1]

    rotated = "rk_test_51HcliRotatedKeyW2yV"
    outputs.append(
        cli("endpoints", "credential", "set", "billing", "--credential-file", "-",
            input=json.dumps({"api_key": rotated})).output
    )  # fmt: skip
    assert "billing: credential replaced" in outputs[-1]
    assert (
        cli.json("endpoints", "credential", "show", "billing")["fingerprint"]
        != first["fingerprint"]
    )

    outputs.append(cli("endpoints", "credential", "remove", "billing").output)
    assert "credential (fingerprint" in outputs[-1] and "removed" in outputs[-1]
    outputs.append(cli("endpoints", "credential", "show", "billing").output)
    assert "credential: none" in outputs[-1]
    stored_nowhere(runtime, [STRIPE_KEY, rotated], *outputs, caplog.text)


def test_a_credential_at_hidden_prompts_and_a_bad_one_named_by_field(cli):
    cli("endpoints", "add", "github", "--name", "repo")
    refused = cli("endpoints", "credential", "set", "repo", input="\n12\n\n\n", ok=False)
    assert refused.exit_code == 1 and "github credentials" in refused.output
    assert cli("endpoints", "credential", "show", "repo").stdout.startswith("credential: none")
    cli("endpoints", "credential", "set", "repo", input=f"{GITHUB_TOKEN}\n")
    assert cli.json("endpoints", "credential", "show", "repo")["fields"] == ["token"]


def test_a_github_app_from_a_key_value_file_or_pasted_at_the_prompts_registers(
    cli, runtime, github_api, tmp_path, caplog
):
    caplog.set_level(logging.DEBUG)
    private, public = rsa_key_pair()
    github_api.add_app(4242, public, 77)
    app_file = credential_file(
        tmp_path, f"app_id=4242\nprivate_key={private}installation_id=77\n"
    )  # the key over several lines, as it is saved
    cli("endpoints", "add", "github", "--name", "repo")
    cli(
        "endpoints", "credential", "set", "repo", "--credential-file", app_file,
        "--scope", SCOPE, "--api-url", github_api.url,
    )  # fmt: skip
    registered = cli("endpoints", "register", "repo", "--event-type", "push")
    assert github_api.hook(hook_id_of(cli, "repo")).events == ["push"]

    pasted = cli("endpoints", "credential", "set", "repo", input=f"\n4242\n{private}77\n")
    fields = cli.json("endpoints", "credential", "show", "repo")["fields"]
    assert fields == ["app_id", "installation_id", "private_key"]
    stored_nowhere(
        runtime, [private.splitlines()[1]], registered.output, pasted.output, caplog.text
    )


def test_a_webhook_made_by_hand_is_linked_and_read_back(cli, stripe_api, stripe_key):
    created = cli.json("endpoints", "add", "stripe", "--name", "billing")
    hand_made = stripe_api.create_endpoint(created["url"], ["invoice.paid"])
    linked = cli(
        "endpoints", "credential", "set", "billing", "--credential-file", stripe_key,
        "--api-url", stripe_api.url, "--hook-id", str(hand_made["id"]),
    )  # fmt: skip
    assert f"webhook at stripe: {hand_made['id']}" in linked.stdout
    shown = cli("endpoints", "show", "billing")
    webhook = json.loads(shown.stdout)["provider_side"]["webhook"]
    assert webhook["seen"]["url"] == created["url"] and webhook["seen"]["enabled"] is True
    assert webhook["drift"] == [] and "DRIFT" not in shown.output


# Removing.


def test_a_scope_with_a_terminal_escape_is_printed_escaped(cli, stripe_api, stripe_key):
    """The scope is the user's own text, kept as given where the provider's API takes none
    (Stripe): a terminal escape in it is shown, never sent to the terminal."""
    cli("endpoints", "add", "stripe", "--name", "billing")
    linked = cli(
        "endpoints", "credential", "set", "billing", "--credential-file", stripe_key,
        "--api-url", stripe_api.url, "--hook-id", "we_hand", "--scope", "acct\x1b[2J\u202e",
    )  # fmt: skip
    assert "webhook at stripe: we_hand in acct\\x1b[2J\\u202e" in linked.stdout
    assert "\x1b" not in linked.output and "\u202e" not in linked.output


def test_remove_of_a_registered_endpoint_without_a_terminal_names_both_flags(
    cli, stripe_api, stripe_key
):
    add_stripe(cli, stripe_api, stripe_key)
    for args in ([], ["--yes"]):
        refused = cli("endpoints", "remove", "billing", *args, ok=False)
        assert refused.exit_code == 2
        assert "--remote" in refused.output and "--keep-remote" in refused.output
    assert endpoint_of(cli, "billing")["name"] == "billing"


def test_remove_remote_deletes_the_webhook_at_the_provider_too(
    cli, runtime, stripe_api, stripe_key
):
    add_stripe(cli, stripe_api, stripe_key)
    hook_id = hook_id_of(cli, "billing")
    removed = cli("endpoints", "remove", "billing", "--remote", "--yes")
    assert "its webhook at stripe removed" in removed.stdout
    with pytest.raises(KeyError):
        stripe_api.endpoint(hook_id)
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


def test_remove_keep_remote_leaves_it_and_says_so(cli, stripe_api, stripe_key):
    add_stripe(cli, stripe_api, stripe_key)
    hook_id = hook_id_of(cli, "billing")
    kept = cli("endpoints", "remove", "billing", "--keep-remote", input="y\n")
    assert "its webhook at stripe stays" in kept.stdout
    assert stripe_api.endpoint(hook_id)["url"]


def test_remove_asks_at_a_terminal_whether_to_remove_the_webhook(
    settings, cli, stripe_api, stripe_key, live
):
    add_stripe(cli, stripe_api, stripe_key)
    hook_id = hook_id_of(cli, "billing")
    code, said = run_in_terminal(
        [sys.executable, "-m", "hooklatch", "endpoints", "remove", "billing"],
        {**cli_env(settings, public_url=live), "PATH": "/usr/bin:/bin"},
        [("Remove the webhook at stripe too? [y/n]", "y"), ("every event it stored? [y/N]", "y")],
    )
    assert code == 0, said
    assert "its webhook at stripe removed" in said
    with pytest.raises(KeyError):
        stripe_api.endpoint(hook_id)


def test_remove_of_an_endpoint_never_registered_asks_only_about_itself(cli, runtime):
    cli("endpoints", "add", "stripe", "--name", "plain")
    kept = cli("endpoints", "remove", "plain", input="n\n", ok=False)
    assert kept.exit_code == 1 and count(runtime, "SELECT count(*) FROM endpoints") == 1
    cli("endpoints", "remove", "plain", input="y\n")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


# Drift.


def test_show_flags_a_hook_disabled_repointed_or_deleted_at_github(cli, github_api):
    add_github(cli, github_api)
    hook_id = hook_id_of(cli, "repo")

    github_api.change_hook(hook_id, active=False)
    shown = cli("endpoints", "show", "repo")
    assert "DRIFT: disabled by the provider" in shown.stderr
    assert json.loads(shown.stdout)["provider_side"]["webhook"]["drift"] == ["disabled"]

    github_api.change_hook(hook_id, active=True, url="https://elsewhere.example.com/hook")
    assert (
        "DRIFT: url changed to https://elsewhere.example.com/hook"
        in cli("endpoints", "show", "repo").stderr
    )

    github_api.delete_hook(hook_id)
    assert "DRIFT: deleted at the provider" in cli("endpoints", "show", "repo").stderr


def test_show_no_check_asks_nothing_and_a_failed_check_says_why(cli, github_api):
    add_github(cli, github_api)
    asked = len(github_api.requests)
    assert cli("endpoints", "show", "repo", "--no-check").stderr == ""
    assert len(github_api.requests) == asked

    github_api.revoke(GITHUB_TOKEN)
    shown = cli("endpoints", "show", "repo")
    assert "the webhook at the provider could not be read" in shown.stderr
    assert "unauthorized" in shown.stderr and "Traceback" not in shown.output
    assert json.loads(shown.stdout)["provider_side"]["credential"]["fields"] == ["token"]


def test_unregister_then_register_again_after_github_lost_the_hook(cli, github_api):
    add_github(cli, github_api)
    hook_id = hook_id_of(cli, "repo")
    github_api.delete_hook(hook_id)
    assert "is no longer at github" in cli("endpoints", "unregister", "repo").stdout
    again = cli("endpoints", "register", "repo")
    new_id = hook_id_of(cli, "repo")
    assert new_id != hook_id and github_api.hook(new_id).events == ["push", "issues"]
    assert "registered with github" in again.stdout


def test_status_shows_drift_and_counts_it_as_a_problem(cli, github_api, stripe_api, stripe_key):
    add_github(cli, github_api)
    add_stripe(cli, stripe_api, stripe_key)
    github_api.change_hook(hook_id_of(cli, "repo"), active=False)
    cli("endpoints", "show", "repo")  # reads it back

    screen = cli("status", ok=False)
    assert screen.exit_code == 2
    assert "    DRIFT: disabled by the provider" in screen.stdout
    assert "no drift seen" in screen.stdout  # billing's webhook at Stripe
    repo, billing = endpoint_of(cli, "repo"), endpoint_of(cli, "billing")
    held = [line for line in screen.stdout.splitlines() if line.startswith("    webhook at ")]
    assert sorted(held) == [
        f"    webhook at github: {hook_id_of(cli, 'repo')} in {SCOPE} -> {repo['url']}, event "
        f"types push, issues, DISABLED (read {read_at(repo)})",
        f"    webhook at stripe: {hook_id_of(cli, 'billing')} -> {billing['url']}, event types "
        f"invoice.paid, customer.created, enabled (read {read_at(billing)}); no drift seen",
    ]
    figures = json.loads(cli("status", "--json", ok=False).stdout)
    sides = {side["name"]: side for side in figures["provider_sides"]}
    assert sides["repo"]["webhook"]["drift"] == ["disabled"]
    assert sides["billing"]["last_run"] is None and sides["billing"]["credential"]["fields"] == [
        "api_key"
    ]
    assert any(
        "repo): its webhook at github: disabled by the provider" in p for p in figures["problems"]
    )


def test_status_shows_what_the_provider_holds_escaped_and_a_look_that_failed(cli, github_api):
    """A URL and an event type read back from GitHub with an escape sequence and a
    right-to-left override in them are printed escaped; after a look that failed, what is
    shown is said to be an earlier look's, and why it failed."""
    add_github(cli, github_api)
    github_api.change_hook(
        hook_id_of(cli, "repo"),
        url="https://elsewhere.example.com/\x1b[2Jhook",
        events=["push", "issues\u202e"],
    )
    cli("endpoints", "show", "repo")  # reads it back

    screen = cli("status", ok=False).stdout
    github_api.revoke(GITHUB_TOKEN)
    cli("endpoints", "show", "repo")  # cannot read it
    failed = cli("status", ok=False).stdout

    assert "\x1b" not in screen + failed and "\u202e" not in screen + failed
    held = "-> https://elsewhere.example.com/\\x1b[2Jhook, event types push, issues\\u202e, enabled"
    assert f"{held} (read " in screen and f"{held} (read earlier: the look at " in failed
    assert "DRIFT: url changed to https://elsewhere.example.com/\\x1b[2Jhook; event types" in screen
    assert "    it could not be read: unauthorized: " in failed
