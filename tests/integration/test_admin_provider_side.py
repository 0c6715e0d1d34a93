"""An endpoint's provider side over the admin API: its API credential, registering its URL
with the provider, reading back what the provider holds (drift), removing it there, and
reconcile runs asked of the relays. Every answer is checked against the description; a
credential's values and a signing secret from a registration are in no answer, log line
or audit row."""

from __future__ import annotations

import json
import logging
from collections import Counter
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update

from hooklatch.endpoints.models import Endpoint
from hooklatch.workers.relay.reconcile import ReconcileRunner
from tests.support.database import count
from tests.support.fake_stripe import ENDPOINTS_READ, ENDPOINTS_WRITE, EVENTS_READ, FakeStripe
from tests.support.pipeline import deliver, drain, make_endpoint, runs_of
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import GITHUB_TOKEN as TOKEN

OTHER_TOKEN = "ghp_admin_api_rotated_token_9876543210"
SCOPE = "repos/acme/shop"

# A provider hooklatch cannot reach the API of.
NO_API = "linear"


def register_body(github, name="shop", **more):
    credential = {"token": more.pop("token", TOKEN)}
    place = {"api_url": github.url, "scope": SCOPE}
    return {
        "provider": "github",
        "name": name,
        "register": {"credential": credential, **place},
        **more,
    }


def registered(api, github, name="shop", event_types=("push", "issues")):
    """A GitHub endpoint added and registered with FakeGitHub in one call; its hook id."""
    body = register_body(github, name)
    body["register"]["event_types"] = list(event_types)
    answer = api.post("/admin/endpoints", json=body)
    assert answer.status_code == 201, answer.json
    return answer.json, answer.json["provider_side"]["webhook"]["hook_id"]


def audit_text(runtime) -> str:
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT actor, action, target, details FROM audit_log")
        return json.dumps([[str(v) for v in row] for row in rows])


def test_an_endpoint_without_a_provider_side_shows_it_empty(api, runtime):
    endpoint, _ = make_endpoint(runtime, NO_API, name="issues", secrets=["lin_wh_secret_1"])

    shown = api.get(f"/admin/endpoints/{endpoint}").json["provider_side"]
    stored = api.get("/admin/endpoints/issues/provider-side").json
    runs = api.get("/admin/endpoints/issues/reconcile/runs").json

    empty: dict[str, object] = {
        "api": False,
        "credential": None,
        "webhook": None,
        "reconcile": None,
        "runs": [],
    }
    assert shown == stored == empty
    assert runs == {"runs": []}


def test_a_provider_without_an_api_takes_no_credential_nor_a_registration(api, runtime):
    make_endpoint(runtime, NO_API, name="issues", secrets=["lin_wh_secret_1"])
    key = {"api_key": "lin_api_never_shown_0123"}

    put = api.put("/admin/endpoints/issues/credential", json={"credential": key})
    added = api.post(
        "/admin/endpoints",
        json={"provider": NO_API, "name": "more", "register": {"credential": key}},
    )

    assert (put.status_code, put.json["error"]) == (400, "bad_credential")
    assert (added.status_code, added.json["error"]) == (400, "bad_credential")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 1
    assert count(runtime, "SELECT count(*) FROM endpoint_credentials") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0
    assert key["api_key"] not in put.get_data(as_text=True) + added.get_data(as_text=True)


SECRET_VALUE = "rk_test_value_in_a_refused_body"


@pytest.mark.parametrize(
    ("method", "path", "body", "reason"),
    [
        ("put", "credential", {}, "bad_credential"),
        ("put", "credential", {"credential": {}}, "bad_credential"),
        ("put", "credential", {"credential": [SECRET_VALUE]}, "bad_credential"),
        ("put", "credential", {"credential": {"api_key": 7}}, "bad_credential"),
        ("put", "credential", {"credential": {"api_key": ""}}, "bad_credential"),
        ("put", "credential", {"credential": {"api_key": SECRET_VALUE + "\x00"}}, "bad_credential"),
        ("put", "credential", {"credential": {"api_key": "k"}, "scope": 7}, "bad_parameter"),
        ("put", "credential", {"credential": {"api_key": "k"}, "colour": "red"}, "bad_parameter"),
        ("post", "register", {"event_types": "push"}, "bad_parameter"),
        ("post", "register", {"event_types": [""]}, "bad_parameter"),
        ("post", "register", {"event_types": [7]}, "bad_parameter"),
        ("post", "reconcile", {"dry_run": "yes"}, "bad_parameter"),
        ("post", "reconcile", {"everything": 1}, "bad_parameter"),
        ("post", "reconcile", {"since": "yesterday"}, "bad_parameter"),
        ("post", "reconcile", {"since": 1700000000}, "bad_parameter"),
        ("post", "reconcile", {"colour": "red"}, "bad_parameter"),
        ("post", "reconcile", {}, "no_credential"),
        ("delete", "credential", [], "malformed_body"),
        ("post", "provider-side/check", {"colour": "red"}, "bad_parameter"),
    ],
)
def test_a_request_that_cannot_be_is_refused_and_nothing_is_written(
    api, runtime, method, path, body, reason
):
    make_endpoint(runtime, name="billing")

    answer = api.open(method, f"/admin/endpoints/billing/{path}", json=body)

    assert (answer.status_code, answer.json["error"]) == (400, reason)
    assert SECRET_VALUE not in answer.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM endpoint_credentials") == 0
    assert count(runtime, "SELECT count(*) FROM reconcile_states") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0


@pytest.mark.parametrize(
    "register",
    [
        "stripe",
        {"credential": {"api_key": SECRET_VALUE}, "colour": "red"},
        {"credential": {"api_key": SECRET_VALUE}, "event_types": "invoice.paid"},
        {"event_types": ["invoice.paid"]},
    ],
)
def test_adding_an_endpoint_with_a_registration_that_cannot_be_adds_nothing(api, runtime, register):
    answer = api.post(
        "/admin/endpoints", json={"provider": "stripe", "name": "billing", "register": register}
    )

    assert answer.status_code == 400
    assert SECRET_VALUE not in answer.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


@pytest.mark.parametrize(
    "place",
    [
        {"scope": "nonsense"},
        {"scope": "repos/acme/" + "s" * 300},
        {"scope": SCOPE, "api_url": "ftp://github.example.com"},
        {"scope": SCOPE, "api_url": "https://" + "g" * 600 + ".example.com"},
        {"scope": SCOPE, "hook_id": "abc"},
        {"scope": SCOPE, "hook_id": "1" * 300},
    ],
    ids=["scope", "long scope", "api_url", "long api_url", "hook_id", "long hook_id"],
)
def test_a_place_the_provider_cannot_reach_is_refused_and_nothing_is_written(api, runtime, place):
    make_endpoint(runtime, name="shop", provider="github")
    linked = api.put(
        "/admin/endpoints/shop/credential", json={"credential": {"token": TOKEN}, **place}
    )
    assert (linked.status_code, linked.json["error"]) == (400, "bad_place")
    if "hook_id" not in place:  # a registration makes the hook: it takes no id
        register = {"credential": {"token": TOKEN}, **place}
        added = api.post(
            "/admin/endpoints", json={"provider": "github", "name": "new", "register": register}
        )
        assert (added.status_code, added.json["error"]) == (400, "bad_place")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 1
    assert count(runtime, "SELECT count(*) FROM endpoint_credentials") == 0
    assert count(runtime, "SELECT count(*) FROM provider_hooks") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0


def test_a_registered_endpoint_takes_no_secret_of_its_own(api, runtime):
    answer = api.post(
        "/admin/endpoints",
        json={
            "provider": "stripe",
            "name": "billing",
            "secrets": ["whsec_given"],
            "register": {"credential": {"api_key": SECRET_VALUE}},
        },
    )

    assert (answer.status_code, answer.json["error"]) == (400, "bad_secret")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0


def test_an_endpoint_not_registered_is_removed_with_its_events(api, client, runtime):
    endpoint, _ = make_endpoint(runtime, name="billing")
    deliver(client, endpoint, "evt_removed_with_it")
    refused = api.delete("/admin/endpoints/billing?remote=maybe")

    removed = api.delete("/admin/endpoints/billing", json={"requested_by": "ann"})

    assert (refused.status_code, refused.json["error"]) == (400, "bad_parameter")
    assert removed.status_code == 200
    assert removed.json == {
        "id": endpoint,
        "name": "billing",
        "removed": True,
        "webhook_removed": False,
    }
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0
    assert count(runtime, "SELECT count(*) FROM events") == 0
    entries = json.loads(audit_text(runtime))
    assert [e[:2] for e in entries] == [["ann (127.0.0.1)", "endpoint_removed"]]
    again = api.delete("/admin/endpoints/billing?remote=false")
    assert (again.status_code, again.json["error"]) == (404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/admin/endpoints/nosuch/provider-side"),
        ("put", "/admin/endpoints/nosuch/credential"),
        ("delete", "/admin/endpoints/nosuch/credential"),
        ("post", "/admin/endpoints/nosuch/register"),
        ("delete", "/admin/endpoints/nosuch/register"),
        ("post", "/admin/endpoints/nosuch/provider-side/check"),
        ("post", "/admin/endpoints/nosuch/reconcile"),
        ("get", "/admin/endpoints/nosuch/reconcile/runs"),
        ("get", "/admin/endpoints/nosuch/reconcile/runs/1"),
        ("delete", "/admin/endpoints/nosuch"),
    ],
)
def test_an_unknown_endpoint_is_404(api, method, path):
    body = {"credential": {"api_key": "rk_test_x"}} if method == "put" else {}

    answer = api.open(method, path, json=body)

    assert (answer.status_code, answer.json["error"]) == (404, "not_found")


def test_runs_are_found_by_a_whole_number_of_the_endpoint(api, runtime):
    make_endpoint(runtime, name="billing")

    for run_id, status in (("x", 400), ("0", 400), ("99", 404)):
        answer = api.get(f"/admin/endpoints/billing/reconcile/runs/{run_id}")
        assert answer.status_code == status
    too_many = api.get("/admin/endpoints/billing/reconcile/runs?limit=501")
    assert (too_many.status_code, too_many.json["error"]) == (400, "bad_parameter")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/admin/endpoints/billing/provider-side"),
        ("put", "/admin/endpoints/billing/credential"),
        ("delete", "/admin/endpoints/billing/credential"),
        ("post", "/admin/endpoints/billing/register"),
        ("delete", "/admin/endpoints/billing/register"),
        ("post", "/admin/endpoints/billing/provider-side/check"),
        ("post", "/admin/endpoints/billing/reconcile"),
        ("get", "/admin/endpoints/billing/reconcile/runs"),
        ("get", "/admin/endpoints/billing/reconcile/runs/1"),
        ("delete", "/admin/endpoints/billing?remote=false"),
    ],
)
def test_every_provider_side_route_asks_for_the_admin_token(client, runtime, method, path):
    make_endpoint(runtime, name="billing")

    for headers in ({}, {"Authorization": "Bearer wrong-" + "0" * 40}):
        answer = client.open(path, method=method.upper(), headers=headers, json={})
        assert (answer.status_code, answer.json["error"]) == (401, "unauthorized")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 1
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0


# -- against FakeGitHub ----------------------------------------------------------------


def test_an_endpoint_registered_in_one_call_verifies_github_s_next_delivery(
    api, client, runtime, router, github, caplog
):
    caplog.set_level(logging.DEBUG)
    ran = runs_of(router, "github")
    body = register_body(github, requested_by="ann")
    body["register"]["event_types"] = ["push", "issues"]

    created = api.post("/admin/endpoints", json=body)

    assert created.status_code == 201
    made = created.json
    assert created.headers["Location"] == f"/admin/endpoints/{made['id']}"
    assert "secret_values" not in made
    side = made["provider_side"]
    assert side["credential"]["fields"] == ["token"]
    hook = github.hook(side["webhook"]["hook_id"])
    assert (hook.url, hook.events, hook.active) == (made["url"], ["push", "issues"], True)
    assert side["webhook"]["seen"]["url"] == made["url"] and side["webhook"]["drift"] == []
    github.deliver(hook.id, "push", {"ref": "refs/heads/main"})
    drain(runtime)
    assert len(ran) == 1
    answers = [created, api.get(f"/admin/endpoints/{made['id']}"), api.get("/admin/audit")]
    shown = " ".join(a.get_data(as_text=True) for a in answers)
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    for value in (TOKEN, hook.secret):
        assert value not in shown + logged + audit_text(runtime)
    actions = [e["action"] for e in api.get("/admin/audit").json["entries"]]
    assert actions == ["webhook_registered", "credential_set", "endpoint_created"]


def test_a_hook_made_by_hand_is_linked_read_back_and_its_credential_rotated(api, runtime, github):
    made = api.post("/admin/endpoints", json={"provider": "github", "name": "shop"}).json
    [secret] = made["secret_values"]
    hook_id = github.add_hook(SCOPE, made["url"], secret=secret, events=("push",))
    github.add_token(OTHER_TOKEN)
    url = "/admin/endpoints/shop/credential"

    linked = api.put(
        url,
        json={
            "credential": {"token": TOKEN},
            "api_url": github.url,
            "scope": SCOPE,
            "hook_id": str(hook_id),
            "requested_by": "ann",
        },
    )
    checked = api.post("/admin/endpoints/shop/provider-side/check")
    rotated = api.put(url, json={"credential": {"token": OTHER_TOKEN}})
    again = api.post("/admin/endpoints/shop/provider-side/check")
    removed = api.delete(url)

    assert linked.status_code == checked.status_code == rotated.status_code == 200
    first, second = linked.json["credential"], rotated.json["credential"]
    assert first["fields"] == second["fields"] == ["token"]
    assert first["fingerprint"] != second["fingerprint"]
    webhook = checked.json["webhook"]
    assert (webhook["hook_id"], webhook["scope"], webhook["event_types"]) == (
        str(hook_id),
        SCOPE,
        None,  # linked: no event types were asked for here
    )
    assert webhook["seen"]["url"] == made["url"] and webhook["seen"]["enabled"] is True
    assert webhook["drift"] == []
    assert [r.headers["authorization"] for r in github.requests] == [
        f"Bearer {TOKEN}",
        f"Bearer {OTHER_TOKEN}",
    ]
    assert again.json["webhook"]["seen"]["checked_at"] >= webhook["seen"]["checked_at"]
    assert removed.status_code == 200
    assert removed.json["credential"] is None
    assert removed.json["webhook"]["hook_id"] == str(hook_id)  # it stays at GitHub
    none_left = api.delete(url)
    assert (none_left.status_code, none_left.json["error"]) == (404, "not_found")
    unreachable = api.post("/admin/endpoints/shop/provider-side/check")
    assert (unreachable.status_code, unreachable.json["error"]) == (404, "no_credential")
    entries = [(e["action"], e["actor"]) for e in api.get("/admin/audit").json["entries"]]
    assert entries[::-1][1:] == [
        ("credential_set", "ann (127.0.0.1)"),
        ("webhook_linked", "ann (127.0.0.1)"),
        ("credential_set", "admin-api (127.0.0.1)"),
        ("credential_removed", "admin-api (127.0.0.1)"),
    ]
    for value in (TOKEN, OTHER_TOKEN, secret):
        assert value not in audit_text(runtime)


def test_drift_at_github_is_seen_on_the_next_check(api, github):
    made, hook_id = registered(api, github)

    github.change_hook(hook_id, active=False, url="https://elsewhere.example/hook")
    disabled = api.post("/admin/endpoints/shop/provider-side/check").json["webhook"]
    github.change_hook(hook_id, active=True, url=made["url"], events=["push"])
    narrowed = api.post("/admin/endpoints/shop/provider-side/check").json["webhook"]
    github.delete_hook(hook_id)
    deleted = api.post("/admin/endpoints/shop/provider-side/check").json["webhook"]
    stored = api.get("/admin/endpoints/shop").json["provider_side"]["webhook"]

    assert disabled["drift"] == ["disabled", "url_changed"]
    assert disabled["seen"]["url"] == "https://elsewhere.example/hook"
    assert disabled["seen"]["enabled"] is False
    assert narrowed["drift"] == ["event_types_changed"]
    assert narrowed["seen"]["event_types"] == ["push"]
    assert deleted["drift"] == ["deleted"] and deleted["seen"]["url"] is None
    assert stored == deleted


def test_a_url_too_long_to_keep_read_back_from_github_is_drift_not_an_error(api, github):
    _, hook_id = registered(api, github)
    far = "https://elsewhere.example/" + "x" * 3000
    github.change_hook(hook_id, url=far)

    checked = api.post("/admin/endpoints/shop/provider-side/check")

    assert checked.status_code == 200, checked.json
    webhook = checked.json["webhook"]
    assert webhook["drift"] == ["url_changed"]
    assert far.startswith(webhook["seen"]["url"]) and len(webhook["seen"]["url"]) <= 2000


def test_registering_later_and_removing_from_github(api, runtime, github):
    made = api.post("/admin/endpoints", json={"provider": "github", "name": "shop"}).json
    [secret] = made["secret_values"]
    credential = {"credential": {"token": TOKEN}, "api_url": github.url, "scope": SCOPE}
    not_yet = api.delete("/admin/endpoints/shop/register")
    api.put("/admin/endpoints/shop/credential", json=credential)

    registered_now = api.post("/admin/endpoints/shop/register", json={"event_types": ["issues"]})
    twice = api.post("/admin/endpoints/shop/register")
    hook_id = registered_now.json["provider_side"]["webhook"]["hook_id"]
    hook = github.hook(hook_id)
    removed = api.delete("/admin/endpoints/shop/register", json={"requested_by": "ann"})
    gone = api.delete("/admin/endpoints/shop/register")

    assert (not_yet.status_code, not_yet.json["error"]) == (404, "no_credential")
    assert registered_now.status_code == 200
    assert (hook.url, hook.events, hook.secret) == (made["url"], ["issues"], secret)
    assert secret not in registered_now.get_data(as_text=True)
    assert (twice.status_code, twice.json["error"]) == (400, "registered_already")
    assert removed.status_code == 200 and removed.json["webhook"]["hook_id"] is None
    assert github.hooks == {}
    assert (gone.status_code, gone.json["error"]) == (400, "not_registered")
    assert count(runtime, "SELECT count(*) FROM endpoints") == 1


def test_github_s_refusal_is_a_502_with_its_reason_and_no_token(api, runtime, github):
    github.revoke(TOKEN)

    refused = api.post("/admin/endpoints", json=register_body(github))
    github.add_token(TOKEN)
    github.script(500, path_contains="/hooks", method="POST")
    failing = api.post("/admin/endpoints/shop/register")

    assert (refused.status_code, refused.json["error"]) == (502, "provider_unauthorized")
    assert "Bad credentials" in refused.json["message"]
    assert "POST /admin/endpoints/shop/register tries again" in refused.json["message"]
    assert (failing.status_code, failing.json["error"]) == (502, "provider_server_error")
    for answer in (refused, failing):
        assert TOKEN not in answer.get_data(as_text=True)
    side = api.get("/admin/endpoints/shop/provider-side").json
    assert side["credential"]["fields"] == ["token"] and side["webhook"]["hook_id"] is None
    retried = api.post("/admin/endpoints/shop/register")
    assert retried.status_code == 200 and len(github.hooks) == 1


def test_removing_a_registered_endpoint_asks_what_becomes_of_its_webhook(api, runtime, github):
    _, kept_hook = registered(api, github, "kept")
    _, dropped_hook = registered(api, github, "dropped")

    asked = api.delete("/admin/endpoints/kept")
    github.script(500, path_contains=f"/hooks/{dropped_hook}", method="DELETE")
    failed = api.delete("/admin/endpoints/dropped?remote=true")
    kept = api.delete("/admin/endpoints/kept?remote=false")
    dropped = api.delete("/admin/endpoints/dropped?remote=true", json={"requested_by": "ann"})

    assert (asked.status_code, asked.json["error"]) == (409, "remote_choice_needed")
    assert "?remote=true" in asked.json["message"] and "?remote=false" in asked.json["message"]
    assert (failed.status_code, failed.json["error"]) == (502, "provider_server_error")
    assert (kept.json["removed"], kept.json["webhook_removed"]) == (True, False)
    assert (dropped.json["removed"], dropped.json["webhook_removed"]) == (True, True)
    assert set(github.hooks) == {int(kept_hook)}
    assert count(runtime, "SELECT count(*) FROM endpoints") == 0
    actions = [e["action"] for e in api.get("/admin/audit").json["entries"]]
    assert actions[:3] == ["endpoint_removed", "webhook_unregistered", "endpoint_removed"]


def test_a_run_asked_through_the_api_is_taken_by_a_relay_and_shown(api, runtime, router, github):
    ran = runs_of(router, "github")
    _, hook_id = registered(api, github)
    lost = [github.deliver(hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True) for n in (1, 2)]
    github.deliver(hook_id, "push", {"ref": "refs/heads/kept"})
    url = "/admin/endpoints/shop/reconcile"

    asked = api.post(url, json={"requested_by": "ann"})
    waiting = api.get("/admin/endpoints/shop/provider-side").json
    taken = ReconcileRunner(runtime).once()
    side = api.get("/admin/endpoints/shop/provider-side").json

    assert asked.status_code == 202
    assert asked.json["reconcile"]["requested"] == {
        "trigger": "api",
        "requested_by": "ann (127.0.0.1)",
        "dry_run": False,
        "since": None,
        "everything": False,
    }
    assert waiting["runs"] == [] and waiting["reconcile"]["requested"] is not None
    assert taken == 1
    assert side["reconcile"]["requested"] is None and side["reconcile"]["running"] is False
    [run] = side["runs"]
    assert (run["status"], run["trigger"], run["requested_by"]) == (
        "finished",
        "api",
        "ann (127.0.0.1)",
    )
    # Listed: three deliveries; the one that succeeded is neither missing nor present.
    assert (run["listed"], run["missing"], run["present"], run["redeliveries"]) == (3, 2, 0, 2)
    assert (side["reconcile"]["missing_total"], side["reconcile"]["redeliveries_total"]) == (2, 2)
    assert api.get(f"{url}/runs").json == {"runs": [run]}
    assert api.get(f"{url}/runs/{run['id']}").json == run
    registered(api, github, "other")
    elsewhere = api.get(f"/admin/endpoints/other/reconcile/runs/{run['id']}")
    assert (elsewhere.status_code, elsewhere.json["error"]) == (404, "not_found")
    drain(runtime)
    assert len(ran) == 3 and set(Counter(ran).values()) == {1}
    assert {d.guid for d in github.redeliveries(hook_id)} == set(lost)
    actions = [e["action"] for e in api.get("/admin/audit").json["entries"]]
    assert "reconcile_requested" in actions


def test_a_dry_run_asked_through_the_api_changes_nothing(api, runtime, github):
    made, hook_id = registered(api, github)
    lost = github.deliver(hook_id, "push", {"ref": "refs/heads/lost"}, fail=True)
    since = datetime.fromisoformat(made["created_at"]) - timedelta(hours=1)

    asked = api.post(
        "/admin/endpoints/shop/reconcile",
        json={"dry_run": True, "since": since.isoformat(), "everything": True},
    )
    ReconcileRunner(runtime).once()
    [run] = api.get("/admin/endpoints/shop/reconcile/runs").json["runs"]

    assert asked.json["reconcile"]["requested"]["dry_run"] is True
    assert (run["dry_run"], run["everything"], run["status"]) == (True, True, "finished")
    assert datetime.fromisoformat(run["since"]) == since
    assert (run["missing"], run["redeliveries"], run["sample"]) == (1, 0, [lost])
    assert github.redeliveries(hook_id) == []
    state = api.get("/admin/endpoints/shop/provider-side").json["reconcile"]
    assert (state["cursor"], state["missing_total"], state["runs_total"]) == (None, 0, 0)


def test_an_endpoint_whose_provider_is_gone_keeps_no_relay_from_the_others(
    api, runtime, github, caplog
):
    """A run that cannot start (its provider's plugin was uninstalled) is logged and
    passed over: the relay goes on to the next endpoint's."""
    registered(api, github, "gone")
    registered(api, github, "shop")
    for name in ("gone", "shop"):
        api.post(f"/admin/endpoints/{name}/reconcile", json={"dry_run": True})
    with runtime.session_factory.begin() as session:
        session.execute(update(Endpoint).where(Endpoint.name == "gone").values(provider="retired"))

    taken = ReconcileRunner(runtime).once()

    assert taken == 1
    assert "provider 'retired' is not installed" in caplog.text
    assert len(api.get("/admin/endpoints/shop/reconcile/runs").json["runs"]) == 1


# -- against FakeStripe ----------------------------------------------------------------

STRIPE_KEY = "rk_test_admin_api_restricted_key_0123"


@pytest.fixture
def stripe():
    with FakeStripe() as fake:
        fake.add_key(STRIPE_KEY, permissions=[EVENTS_READ, ENDPOINTS_READ, ENDPOINTS_WRITE])
        yield fake


def test_a_stripe_endpoint_keeps_the_secret_stripe_returned_and_pulls_what_it_missed(
    api, client, runtime, router, stripe, caplog
):
    caplog.set_level(logging.DEBUG)
    ran = runs_of(router, "stripe")
    register = {
        "credential": {"api_key": STRIPE_KEY},
        "event_types": ["invoice.paid"],
        "api_url": stripe.url,
    }
    created = api.post(
        "/admin/endpoints", json={"provider": "stripe", "name": "billing", "register": register}
    )
    made = created.json
    hook_id = made["provider_side"]["webhook"]["hook_id"]
    secret = stripe.secret_of(hook_id)
    delivered = stripe_event("evt_delivered")
    missed = [stripe.create_event("invoice.paid", {"id": f"in_{n}"})["id"] for n in range(3)]

    answer = client.post(
        f"/hooks/{made['id']}", data=delivered, headers=stripe_headers(delivered, secret)
    )
    api.post("/admin/endpoints/billing/reconcile", json={"requested_by": "ann"})
    ReconcileRunner(runtime).once()
    [run] = api.get("/admin/endpoints/billing/reconcile/runs").json["runs"]
    stripe.update_endpoint(hook_id, disabled=True)
    drift = api.post("/admin/endpoints/billing/provider-side/check").json["webhook"]["drift"]

    assert created.status_code == 201 and "secret_values" not in made
    held = stripe.endpoint(hook_id)
    assert (held["url"], held["enabled_events"]) == (made["url"], ["invoice.paid"])
    assert answer.status_code == 200
    assert (run["status"], run["missing"], run["fetched"]) == ("finished", 3, 3)
    assert drift == ["disabled"]
    drain(runtime)
    assert len(ran) == 4 and set(Counter(ran).values()) == {1}
    with runtime.engine.connect() as connection:
        stored = connection.exec_driver_sql(
            "SELECT external_id, origin, verified_by FROM events WHERE origin = 'api'"
        ).all()
    assert {row[0] for row in stored} == set(missed)
    assert {(row[1], row[2]) for row in stored} == {("api", "api_call")}
    shown = " ".join(
        api.get(path).get_data(as_text=True)
        for path in ("/admin/endpoints/billing", "/admin/endpoints", "/admin/audit")
    )
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    for value in (STRIPE_KEY, secret):
        assert value not in created.get_data(as_text=True) + shown + logged + audit_text(runtime)
