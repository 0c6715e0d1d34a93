"""Endpoints over the admin API: list, show, add, enable, disable, secrets added and
removed, through the service functions the CLI and the console call, with the same audit
entries. A secret's value is answered once, where it was generated; never in another
answer, a log line or the audit log. Every answer is checked against the description."""

from __future__ import annotations

import json
import logging

import pytest
from sqlalchemy import select, text

from hooklatch.audit import AuditEntry
from tests.support.cli import run_cli
from tests.support.database import TABLES, count, sqlite_settings
from tests.support.openapi import DescribedClient
from tests.support.signing import github_headers, stripe_event, stripe_headers
from tests.support.tokens import AUTH

PUSH = b'{"ref": "refs/heads/main"}'


def add(api, provider="github", name="repo", **fields):
    answer = api.post("/admin/endpoints", json={"provider": provider, "name": name, **fields})
    assert answer.status_code == 201, answer.json
    return answer.json


def push(client, endpoint, secret):
    headers = github_headers(PUSH, secret)
    return client.post(f"/hooks/{endpoint}", data=PUSH, headers=headers).status_code


def audit_rows(runtime):
    with runtime.session_factory() as session:
        return session.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()


def test_adding_a_github_endpoint_answers_its_generated_secret_once(api, client, runtime):
    created = api.post(
        "/admin/endpoints",
        json={"provider": "github", "name": "repo", "requested_by": "alice"},
    )

    assert created.status_code == 201
    body = created.json
    assert created.headers["Location"] == f"/admin/endpoints/{body['id']}"
    assert body["url"] == f"http://hooks.example.test/hooks/{body['id']}"
    [secret] = body["secret_values"]
    assert len(secret) >= 40
    assert [s["fingerprint"] for s in body["secrets"]] != []
    assert push(client, body["id"], secret) == 200
    # Never again: not in the endpoint, nor the list, nor the audit log.
    for path in ("/admin/endpoints", f"/admin/endpoints/{body['id']}", "/admin/audit"):
        assert secret not in api.get(path).get_data(as_text=True)
    [entry] = audit_rows(runtime)
    assert (entry.action, entry.actor) == ("endpoint_created", "alice (127.0.0.1)")
    assert entry.details == {
        "name": "repo",
        "provider": "github",
        "secrets": [body["secrets"][0]["fingerprint"]],
    }


def test_a_secret_given_is_never_answered_back(api, client):
    body = add(api, "stripe", "billing", secrets=["whsec_given_by_stripe"])

    assert "secret_values" not in body
    assert "whsec_given_by_stripe" not in json.dumps(body)
    event = stripe_event("evt_given")
    headers = stripe_headers(event, "whsec_given_by_stripe")
    assert client.post(f"/hooks/{body['id']}", data=event, headers=headers).status_code == 200


def test_a_stripe_endpoint_refuses_deliveries_until_the_secret_stripe_shows_is_added(api, client):
    body = add(api, "stripe", "billing")
    assert body["secrets"] == [] and "secret_values" not in body
    event = stripe_event("evt_early")
    headers = stripe_headers(event, "whsec_from_dashboard")
    refused = client.post(f"/hooks/{body['id']}", data=event, headers=headers)
    assert (refused.status_code, refused.json["error"]) == (401, "no_secret")
    none_given = api.post(f"/admin/endpoints/{body['id']}/secrets", json={})
    assert (none_given.status_code, none_given.json["error"]) == (400, "empty_secret")

    added = api.post(
        f"/admin/endpoints/{body['id']}/secrets", json={"secret": "whsec_from_dashboard"}
    )

    assert added.status_code == 201
    assert "secret_value" not in added.json and "whsec_" not in added.get_data(as_text=True)
    assert client.post(f"/hooks/{body['id']}", data=event, headers=headers).status_code == 200


def test_a_rotation_adds_a_generated_secret_then_removes_the_old_one(api, client, runtime):
    body = add(api)
    [old] = body["secret_values"]
    old_fingerprint = body["secrets"][0]["fingerprint"]
    url = f"/admin/endpoints/{body['name']}/secrets"  # by name as well as by id

    added = api.post(url)  # no body at all: one is generated
    assert added.status_code == 201
    new = added.json["secret_value"]
    assert new != old and added.json["endpoint_id"] == body["id"]
    assert (push(client, body["id"], old), push(client, body["id"], new)) == (200, 200)

    removed = api.delete(f"{url}/{old_fingerprint}")

    assert removed.status_code == 200
    assert (removed.json["fingerprint"], removed.json["endpoint_id"]) == (
        old_fingerprint,
        body["id"],
    )
    assert (push(client, body["id"], old), push(client, body["id"], new)) == (401, 200)
    shown = api.get(f"/admin/endpoints/{body['id']}").json
    assert [s["id"] for s in shown["secrets"]] == [added.json["id"]]
    assert shown["secrets"][0]["last_verified_at"] is None  # written in batches, later
    last = api.delete(f"{url}/{added.json['id']}")
    assert (last.status_code, last.json["error"]) == (409, "last_secret")
    unknown = api.delete(f"{url}/abcdef012345")
    assert (unknown.status_code, unknown.json["error"]) == (404, "not_found")
    actions = [e.action for e in audit_rows(runtime)]
    assert actions == ["endpoint_created", "secret_added", "secret_removed"]
    everything = json.dumps([(e.actor, e.target, e.details) for e in audit_rows(runtime)])
    assert old not in everything and new not in everything


def test_disabling_answers_404_to_deliveries_until_enabled_again(api, client, runtime):
    body = add(api)
    [secret] = body["secret_values"]

    disabled = api.post(f"/admin/endpoints/{body['id']}/disable", json={"requested_by": "bob"})

    assert (disabled.status_code, disabled.json["enabled"]) == (200, False)
    assert push(client, body["id"], secret) == 404
    again = api.post(f"/admin/endpoints/{body['id']}/disable")  # nothing to change
    assert (again.status_code, again.json["enabled"]) == (200, False)
    enabled = api.post(f"/admin/endpoints/{body['id']}/enable")
    assert (enabled.status_code, enabled.json["enabled"]) == (200, True)
    assert push(client, body["id"], secret) == 200
    entries = [(e.action, e.actor) for e in audit_rows(runtime)][1:]
    assert entries == [
        ("endpoint_disabled", "bob (127.0.0.1)"),
        ("endpoint_enabled", "admin-api (127.0.0.1)"),
    ]


def test_endpoints_are_listed_oldest_first_a_page_at_a_time(api):
    made = [add(api, name=f"repo-{n}")["id"] for n in range(5)]

    seen, after, pages = [], None, 0
    while True:
        query = "?limit=2" + (f"&after={after}" if after else "")
        answer = api.get(f"/admin/endpoints{query}").json
        seen += [e["id"] for e in answer["endpoints"]]
        pages += 1
        after = answer["next"]
        if after is None:
            break

    assert (seen, pages) == (made, 3)
    everything = api.get("/admin/endpoints").json
    assert [e["id"] for e in everything["endpoints"]] == made and everything["next"] is None
    assert all("secret_values" not in e for e in everything["endpoints"])
    for limit in ("0", "501", "-1", "x"):
        refused = api.get(f"/admin/endpoints?limit={limit}")
        assert (refused.status_code, refused.json["error"]) == (400, "bad_parameter")
    unknown = api.get("/admin/endpoints?after=ep_nosuch")
    assert (unknown.status_code, unknown.json["error"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"name": "x"}, 400, "bad_parameter"),
        ({"provider": "github"}, 400, "bad_parameter"),
        ({"provider": "nosuch", "name": "x"}, 400, "unknown_provider"),
        ({"provider": "github", "name": "taken"}, 409, "name_taken"),
        ({"provider": "github", "name": "x" * 201}, 400, "bad_parameter"),
        ({"provider": "github", "name": "a\x00b"}, 400, "bad_parameter"),
        ({"provider": "github", "name": "\ud800"}, 400, "bad_parameter"),
        ({"provider": "github", "name": 7}, 400, "bad_parameter"),
        ({"provider": "github", "name": "x", "secrets": "s3cret-value"}, 400, "bad_secret"),
        ({"provider": "github", "name": "x", "secrets": [""]}, 400, "bad_secret"),
        ({"provider": "github", "name": "x", "secrets": [7]}, 400, "bad_secret"),
        ({"provider": "github", "name": "x", "secrets": ["a\x00b"]}, 400, "bad_secret"),
        ({"provider": "github", "name": "x", "options": {"colour": "red"}}, 400, "bad_option"),
        ({"provider": "github", "name": "x", "options": ["colour"]}, 400, "bad_option"),
        ({"provider": "github", "name": "x", "options": {"a": 1}}, 400, "bad_option"),
        ({"provider": "meta", "name": "x"}, 400, "bad_option"),  # its verify_token
        ({"provider": "github", "name": "x", "colour": "red"}, 400, "bad_parameter"),
        ([], 400, "malformed_body"),
    ],
)
def test_an_endpoint_that_cannot_be_is_refused_and_nothing_is_written(
    api, runtime, body, status, reason
):
    add(api, name="taken")

    answer = api.post("/admin/endpoints", json=body)

    assert (answer.status_code, answer.json["error"]) == (status, reason)
    assert count(runtime, "SELECT count(*) FROM endpoints") == 1
    assert count(runtime, "SELECT count(*) FROM audit_log") == 1


def test_a_secret_in_a_refused_body_is_not_repeated(api):
    answer = api.post("/admin/endpoints", json={"provider": "nosuch", "secrets": ["s3cr3t-xyz"]})
    wrong = api.post(
        "/admin/endpoints", json={"provider": "github", "name": "x", "secrets": "s3cr3t-xyz"}
    )

    assert answer.status_code == wrong.status_code == 400
    assert "s3cr3t-xyz" not in answer.get_data(as_text=True) + wrong.get_data(as_text=True)


def test_a_body_that_is_not_json_is_refused(api, runtime):
    answer = api.post(
        "/admin/endpoints", data=b"provider=github", headers={"Content-Type": "text/plain"}
    )
    assert (answer.status_code, answer.json["error"]) == (400, "malformed_body")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/admin/endpoints/nosuch"),
        ("post", "/admin/endpoints/nosuch/enable"),
        ("post", "/admin/endpoints/nosuch/disable"),
        ("post", "/admin/endpoints/nosuch/secrets"),
        ("delete", "/admin/endpoints/nosuch/secrets/1"),
    ],
)
def test_an_unknown_endpoint_is_404(api, method, path):
    answer = api.open(method, path)
    assert (answer.status_code, answer.json["error"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/admin/endpoints"),
        ("post", "/admin/endpoints"),
        ("get", "/admin/endpoints/repo"),
        ("post", "/admin/endpoints/repo/enable"),
        ("post", "/admin/endpoints/repo/disable"),
        ("post", "/admin/endpoints/repo/secrets"),
        ("delete", "/admin/endpoints/repo/secrets/1"),
    ],
)
def test_every_endpoint_route_asks_for_the_admin_token(api, client, runtime, method, path):
    add(api)

    for headers in ({}, {"Authorization": "Bearer wrong-" + "0" * 40}):
        answer = client.open(path, method=method.upper(), headers=headers, json={})
        assert (answer.status_code, answer.json["error"]) == (401, "unauthorized")
    assert count(runtime, "SELECT count(*) FROM endpoint_secrets") == 1
    assert count(runtime, "SELECT count(*) FROM audit_log") == 1


def test_wrong_tokens_lock_the_address_out_of_the_endpoint_routes(app_with, described):
    app = app_with(admin_lockout_failures=3)
    guesser = DescribedClient(
        app.test_client(), described, {"Authorization": "Bearer guess-" + "5" * 40}
    )
    answers = [guesser.post("/admin/endpoints", json={}).status_code for _ in range(3)]
    right = DescribedClient(app.test_client(), described, AUTH)

    locked = right.post("/admin/endpoints", json={"provider": "github", "name": "x"})

    assert answers == [401, 401, 429]  # the third failure locks the address out
    assert (locked.status_code, locked.json["error"]) == (429, "too_many_attempts")
    assert "Retry-After" in locked.headers


def test_a_body_over_the_size_limit_is_413_and_stores_nothing(app_with, described, runtime):
    api = DescribedClient(app_with(max_body_bytes=4096).test_client(), described, AUTH)
    body = {"provider": "github", "name": "big", "secrets": ["x" * 5000]}

    answer = api.post("/admin/endpoints", json=body)

    assert (answer.status_code, answer.json["error"]) == (413, "body_too_large")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


def test_no_secret_reaches_a_log_line(api, client, caplog):
    caplog.set_level(logging.DEBUG)
    body = add(api, secrets=["given-secret-0123456789"])
    added = api.post(f"/admin/endpoints/{body['id']}/secrets").json["secret_value"]
    api.post(f"/admin/endpoints/{body['id']}/secrets", json={"secret": "another-given-9876543210"})
    api.delete(f"/admin/endpoints/{body['id']}/secrets/{body['secrets'][0]['id']}")
    api.post("/admin/endpoints", json={"provider": "nosuch", "secrets": ["refused-secret-555"]})
    push(client, body["id"], added)

    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    for secret in ("given-secret-0123456789", added, "another-given-9876543210", "refused-secret"):
        assert secret not in logged


# -- the same audit entries as the CLI ----------------------------------------------------


def _as_the_cli_does(settings, _client, secret_file):
    created = json.loads(
        run_cli(
            settings, "endpoints", "add", "github", "--name", "repo",
            "--secret-file", str(secret_file), "--json",
        ).output
    )  # fmt: skip
    run_cli(settings, "endpoints", "disable", "repo")
    run_cli(settings, "endpoints", "enable", "repo")
    run_cli(settings, "endpoints", "secrets", "add", "repo", "--secret", "the-second-secret")
    run_cli(settings, "endpoints", "secrets", "remove", "repo", str(created["secrets"][0]["id"]))
    run_cli(settings, "ordering", "set", "repo", "--policy", "fifo", "--hold", "5")
    return created["id"]


def _as_the_api_does(_settings, api, _secret_file):
    created = add(api, secrets=["the-first-secret"])
    api.post("/admin/endpoints/repo/disable")
    api.post("/admin/endpoints/repo/enable")
    api.post("/admin/endpoints/repo/secrets", json={"secret": "the-second-secret"})
    api.delete(f"/admin/endpoints/repo/secrets/{created['secrets'][0]['id']}")
    api.put("/admin/endpoints/repo/ordering", json={"policy": "fifo", "hold_seconds": 5})
    return created["id"]


def test_the_api_writes_the_audit_entries_the_cli_writes(settings, api, runtime, tmp_path):
    """The same changes made both ways, from an empty database each time: the same
    entries, but for the endpoint's id (random) and who acted."""
    secret_file = tmp_path / "secret"
    secret_file.write_text("the-first-secret\n")
    written = {}
    for face, steps in (("cli", _as_the_cli_does), ("api", _as_the_api_does)):
        with runtime.engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        endpoint = steps(settings, api, secret_file)
        rows = audit_rows(runtime)
        written[face] = [
            (e.action, e.target.replace(endpoint, "<endpoint>"), e.details) for e in rows
        ]
        assert all(e.actor.endswith(" (cli)" if face == "cli" else " (127.0.0.1)") for e in rows)

    assert [action for action, _, _ in written["api"]] == [
        "endpoint_created",
        "endpoint_disabled",
        "endpoint_enabled",
        "secret_added",
        "secret_removed",
        "endpoint_ordering",
    ]
    assert written["api"] == written["cli"]


# -- on the embedded default (SQLite) -----------------------------------------------------


@pytest.fixture
def sqlite_client(settings, tmp_path, app_with):
    sqlite = sqlite_settings(settings, tmp_path / "db")
    fields = {"database_url": None, "redis_url": None, "instance_path": sqlite.instance_path}
    return app_with(**fields).test_client()


def test_endpoints_over_the_api_on_sqlite(sqlite_client, described):
    api = DescribedClient(sqlite_client, described, AUTH)
    made = [add(api, name=f"repo-{n}") for n in range(3)]
    [secret] = made[0]["secret_values"]

    first = api.get("/admin/endpoints?limit=2").json
    second = api.get(f"/admin/endpoints?limit=2&after={first['next']}").json
    api.post("/admin/endpoints/repo-0/disable")
    added = api.post("/admin/endpoints/repo-0/secrets").json
    removed = api.delete(f"/admin/endpoints/repo-0/secrets/{made[0]['secrets'][0]['fingerprint']}")

    assert [e["id"] for e in first["endpoints"] + second["endpoints"]] == [e["id"] for e in made]
    assert second["next"] is None
    assert removed.status_code == 200
    shown = api.get("/admin/endpoints/repo-0").json
    assert (shown["enabled"], [s["id"] for s in shown["secrets"]]) == (False, [added["id"]])
    assert push(sqlite_client, made[0]["id"], secret) == 404
    actions = [e["action"] for e in api.get("/admin/audit").json["entries"]]
    assert actions[:3] == ["secret_removed", "secret_added", "endpoint_disabled"]
    assert secret not in json.dumps(api.get("/admin/audit").json)
