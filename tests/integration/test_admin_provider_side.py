"""An endpoint's provider side over the admin API: its API credential, registering its URL
with the provider, reading back what the provider holds (drift), removing it there, and
reconcile runs asked of the relays. Every answer is checked against the description; a
credential's values and a signing secret from a registration are in no answer, log line
or audit row."""

from __future__ import annotations

import json

import pytest

from tests.support.database import count
from tests.support.openapi import Described, DescribedClient
from tests.support.pipeline import deliver, make_endpoint
from tests.support.tokens import AUTH

# A provider hooklatch cannot reach the API of.
NO_API = "linear"


@pytest.fixture
def described():
    return Described()


@pytest.fixture
def api(client, described):
    return DescribedClient(client, described, AUTH)


def audit_text(runtime) -> str:
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT actor, action, target, details FROM audit_log")
        return json.dumps([[str(v) for v in row] for row in rows])


def test_an_endpoint_without_a_provider_side_shows_it_empty(api, runtime):
    endpoint, _ = make_endpoint(runtime, NO_API, name="issues", secrets=["lin_wh_secret_1"])

    shown = api.get(f"/admin/endpoints/{endpoint}").json["provider_side"]
    stored = api.get("/admin/endpoints/issues/provider-side").json
    runs = api.get("/admin/endpoints/issues/reconcile/runs").json

    empty = {"api": False, "credential": None, "webhook": None, "reconcile": None, "runs": []}
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
