"""The admin API's description (hooklatch/admin/openapi.json) names exactly the routes
Flask serves under /admin, is served behind the admin token, and every operation's real
answers match the schemas it gives."""

from __future__ import annotations

import json

from hooklatch.admin.openapi import spec_text
from hooklatch.workers.relay.reconcile import ReconcileRunner
from tests.integration.test_destinations_api import http_body, seed_forwards
from tests.integration.test_ordering_surfaces import fifo_endpoint, park
from tests.support.openapi import Described, DescribedClient, described_routes, served_routes
from tests.support.pipeline import deliver, make_dead, make_endpoint
from tests.support.tokens import AUTH, GITHUB_TOKEN


def test_the_description_names_every_admin_route_and_no_other(app):
    served = served_routes(app)
    described = described_routes(Described().spec)

    assert ("/admin/endpoints/{endpoint}/secrets/{secret_ref}", "delete") in served
    assert not served - described, f"served but not described: {sorted(served - described)}"
    assert not described - served, f"described but not served: {sorted(described - served)}"


def test_a_route_added_without_its_description_is_found(app):
    """The check above can fail: a route Flask serves that the description lacks."""

    @app.get("/admin/undescribed/<thing_id>")
    def undescribed(thing_id):
        return {}

    missing = served_routes(app) - described_routes(Described().spec)

    assert missing == {("/admin/undescribed/{thing_id}", "get")}


def test_the_description_is_served_behind_the_admin_token(client):
    assert client.get("/admin/openapi.json").status_code == 401

    answer = client.get("/admin/openapi.json", headers=AUTH)

    assert (answer.status_code, answer.mimetype) == (200, "application/json")
    assert answer.json == json.loads(spec_text())
    assert answer.json["openapi"].startswith("3.1")


def test_every_operation_answers_as_described(client, runtime, github):
    """Each route is called until it answers with success, and with some of its errors;
    every answer is checked against the description as it comes (DescribedClient)."""
    described = Described()
    api = DescribedClient(client, described, AUTH)
    api.get("/admin/openapi.json")

    # Endpoints and their secrets.
    repo = api.post("/admin/endpoints", json={"provider": "github", "name": "repo"}).json
    api.post("/admin/endpoints", json={"provider": "github", "name": "repo"})  # 409
    api.get("/admin/endpoints?limit=1")
    api.get(f"/admin/endpoints/{repo['id']}")
    api.get("/admin/endpoints/nosuch")  # 404
    api.post("/admin/endpoints/repo/disable")
    api.post("/admin/endpoints/repo/enable")
    second = api.post("/admin/endpoints/repo/secrets").json
    api.delete(f"/admin/endpoints/repo/secrets/{repo['secrets'][0]['fingerprint']}")
    api.delete(f"/admin/endpoints/repo/secrets/{second['id']}")  # 409 last_secret

    # Events, a replay and a bulk replay.
    stripe, _ = make_endpoint(runtime, name="billing")
    kept = deliver(client, stripe, "evt_kept")
    dead = make_dead(client, runtime, stripe, "evt_d1", "evt_d2", "evt_d3", event_type="x.y")
    api.get("/admin/events?limit=2")
    api.get(f"/admin/events?status=dead&endpoint=billing&before={dead[-1]}")
    api.get("/admin/events?status=lost")  # 400
    api.get(f"/admin/events/{kept}")
    api.get("/admin/events/424242")  # 404
    api.post(f"/admin/events/{dead[0]}/replay", json={"reason": "fixed", "requested_by": "ann"})
    api.post(f"/admin/events/{kept}/replay", json={"reason": "again"})  # 409 event_pending
    api.get(f"/admin/events/{dead[0]}")
    dry = api.post("/admin/replays", json={"status": "dead", "dry_run": True}).json
    api.post("/admin/replays", json={"status": "dead"})  # 400 reason_required
    batch = api.post(
        "/admin/replays",
        json={"status": "dead", "reason": "fixed", "watermark": dry["watermark"]},
    ).json
    api.get("/admin/replays")
    api.get(f"/admin/replays/{batch['id']}")
    api.post(f"/admin/replays/{batch['id']}/cancel", json={"requested_by": "ann"})
    api.get("/admin/replays/424242")  # 404

    # Ordering: settings, a parked key and its release.
    fifo = fifo_endpoint(runtime, name="shop")
    park(runtime, fifo, "cus_parked", behind=1)
    api.get("/admin/keys/blocked")
    api.get("/admin/endpoints/shop/ordering")
    api.put("/admin/endpoints/shop/ordering", json={"dead": "release", "hold_seconds": 5})
    api.put("/admin/endpoints/shop/ordering", json={"policy": "bogus"})  # 400
    release = {"key": "cus_parked", "reason": "handled by hand"}
    api.post("/admin/endpoints/shop/keys/release", json=release)
    api.post("/admin/endpoints/shop/keys/release", json=release)  # 404 not_parked
    api.get("/admin/audit?limit=100")

    # Destinations, and a replay of their forwards.
    destination = http_body(filter={"endpoint": "billing", "types": ["x.*"]}, rate_limit=2)
    warehouse = api.post("/admin/destinations", json=destination).json
    api.post("/admin/destinations", json=destination)  # 409 destination_exists
    api.post("/admin/destinations", json=http_body(name="other", kind="pigeon"))  # 400
    seed_forwards(runtime, warehouse["id"], {dead[1]: "dead", dead[2]: "dead"})
    api.get("/admin/destinations")
    api.get(f"/admin/destinations/{warehouse['id']}")
    api.get("/admin/destinations/nosuch")  # 404 unknown_destination
    api.open("patch", "/admin/destinations/warehouse", json={"rate_limit": None})
    api.post("/admin/destinations/warehouse/pause")
    api.post("/admin/destinations/warehouse/resume")
    api.post("/admin/destinations/warehouse/replay", json={"dry_run": True})
    api.post("/admin/destinations/warehouse/replay", json={"type": "x.*", "reason": "fixed"})
    api.delete("/admin/destinations/warehouse")

    # The provider side, against a local server that answers as GitHub's API does.
    place = {"api_url": github.url, "scope": "repos/acme/widgets"}
    credential = {"credential": {"token": GITHUB_TOKEN}, **place}
    api.post(
        "/admin/endpoints", json={"provider": "github", "name": "hooked", "register": credential}
    )
    api.get("/admin/endpoints/hooked/provider-side")
    api.post("/admin/endpoints/hooked/provider-side/check")
    api.post("/admin/endpoints/hooked/register")  # 400 registered_already
    api.delete("/admin/endpoints/hooked")  # 409 remote_choice_needed
    api.post("/admin/endpoints/hooked/reconcile", json={"dry_run": True})
    ReconcileRunner(runtime).once()
    run = api.get("/admin/endpoints/hooked/reconcile/runs").json["runs"][0]
    api.get(f"/admin/endpoints/hooked/reconcile/runs/{run['id']}")
    api.delete("/admin/endpoints/hooked/register")
    api.put("/admin/endpoints/repo/credential", json=credential)
    api.post("/admin/endpoints/repo/register", json={"event_types": ["push"]})
    github.revoke(GITHUB_TOKEN)
    api.delete("/admin/endpoints/repo?remote=true")  # 502 provider_unauthorized
    api.delete("/admin/endpoints/repo/credential")
    api.delete("/admin/endpoints/hooked?remote=false")

    succeeded = {(path, method) for path, method, status in described.checked if status < 300}
    assert succeeded == described_routes(described.spec)
    errors = {status for _, _, status in described.checked if status >= 400}
    assert errors == {400, 404, 409, 502}


def test_an_answer_that_strays_from_the_description_is_caught():
    """The checks above can fail: a field the description does not name, or one missing."""
    described = Described()
    ordering = {
        "endpoint_id": "ep_1",
        "name": "shop",
        "policy": "fifo",
        "dead": "park",
        "hold_seconds": 0,
        "key_path": None,
        "revision": 1,
    }
    described.check("get", "/admin/endpoints/shop/ordering", 200, ordering)

    for strayed in (
        {**ordering, "colour": "red"},
        {k: v for k, v in ordering.items() if k != "name"},
    ):
        try:
            described.check("get", "/admin/endpoints/shop/ordering", 200, strayed)
        except AssertionError:
            continue
        raise AssertionError(f"not caught: {strayed}")
