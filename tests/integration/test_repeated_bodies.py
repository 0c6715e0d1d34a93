"""A signed body seen again under another event id or type (the id and type headers are
not signed by Shopify or GitHub) is stored, since senders do that too, but flagged on
the event, counted and logged."""

import json
import logging

from tests.support.cli import run_cli
from tests.support.database import count
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.sendgrid import OLD, PRIVATE, batch, event, sendgrid_headers
from tests.support.providers.shopify import SECRET, classic_headers, order
from tests.support.signing import github_headers
from tests.support.tokens import AUTH


def shown(client, event_id):
    response = client.get(f"/admin/events/{event_id}", headers=AUTH)
    assert response.status_code == 200, response.json
    return response.json


def repeats(runtime, endpoint):
    return count(
        runtime,
        "SELECT count(*) FROM events WHERE endpoint_id = :e AND repeats_event_id IS NOT NULL",
        e=endpoint,
    )


def test_a_shopify_body_replayed_under_other_topics_and_ids_is_flagged_and_counted(
    client, runtime, caplog
):
    caplog.set_level(logging.INFO)
    endpoint, _ = make_endpoint(runtime, "shopify", secrets=[SECRET])
    body = order(note="captured")
    answers = []
    for event_id, topic in [("e-1", "orders/create"), ("e-2", "orders/paid"), ("e-3", "x/y")]:
        headers = {**classic_headers(body, SECRET, event_id=event_id), "X-Shopify-Topic": topic}
        response = post_json(client, endpoint, body, headers)
        assert response.status_code == 200, response.json
        answers.append(response.json)
    assert [a["status"] for a in answers] == ["accepted"] * 3  # a sender may do this too
    first, second, third = (a["events"][0]["id"] for a in answers)

    assert shown(client, first)["repeats_event_id"] is None
    assert shown(client, first)["repeated_by"] == [second, third]
    assert shown(client, second)["repeats_event_id"] == first
    assert shown(client, third)["repeats_event_id"] == first
    assert repeats(runtime, endpoint) == 2
    warnings = [r for r in caplog.records if "repeats the body" in r.getMessage()]
    assert len(warnings) == 2
    assert all(r.levelno == logging.WARNING for r in warnings)
    logged = "\n".join(r.getMessage() + str(r.__dict__) for r in caplog.records)
    assert "captured" not in logged  # never the body
    assert classic_headers(body, SECRET)["X-Shopify-Hmac-Sha256"] not in logged

    again = {**classic_headers(body, SECRET, event_id="e-1"), "X-Shopify-Topic": "orders/paid"}
    response = post_json(client, endpoint, body, again)
    assert response.json["status"] == "duplicate"  # the same id: a plain duplicate
    assert response.json["events"][0]["id"] == first
    assert repeats(runtime, endpoint) == 2
    assert count(runtime, "SELECT count(*) FROM events") == 3
    assert count(runtime, "SELECT sum(mismatched_duplicates) FROM events") == 0


def test_a_github_body_replayed_under_another_event_and_delivery_is_flagged(client, runtime):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    body = json.dumps({"action": "opened", "issue": {"number": 7}}).encode()
    ids = []
    for delivery, kind in [("d-1", "issues"), ("d-2", "pull_request"), ("d-1", "issues")]:
        headers = github_headers(body, "gh-secret", event=kind, delivery=delivery)
        response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
        assert response.status_code == 200, response.json
        ids.append((response.json["status"], response.json["events"][0]["id"]))
    (_, first), (status, second), (again, third) = ids
    assert status == "accepted"
    assert (again, third) == ("duplicate", first)
    assert shown(client, second)["repeats_event_id"] == first
    assert shown(client, second)["type"] == "pull_request.opened"
    assert repeats(runtime, endpoint) == 1


def cli(settings, *args):
    return json.loads(run_cli(settings, *args).output)


def test_the_cli_shows_the_repeat_on_the_event_and_counts_it_on_the_endpoint(
    client, runtime, settings
):
    endpoint, _ = make_endpoint(runtime, "github", name="repeats", secrets=["gh-secret"])
    assert cli(settings, "endpoints", "show", "repeats")["repeated_bodies"] == 0
    body = json.dumps({"action": "closed", "issue": {"number": 8}}).encode()
    ids = []
    for delivery in ("d-1", "d-2", "d-3"):
        headers = github_headers(body, "gh-secret", delivery=delivery)
        ids.append(client.post(f"/hooks/{endpoint}", data=body, headers=headers).json)
    first, second, third = (answer["events"][0]["id"] for answer in ids)
    assert cli(settings, "events", "show", str(third))["repeats_event_id"] == first
    assert cli(settings, "events", "show", str(first))["repeated_by"] == [second, third]
    assert cli(settings, "endpoints", "show", "repeats")["repeated_bodies"] == 2


def test_different_bodies_and_the_events_of_one_request_are_not_flagged(client, runtime):
    github, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    for number in (1, 2):
        body = json.dumps({"action": "opened", "issue": {"number": number}}).encode()
        response = client.post(
            f"/hooks/{github}", data=body, headers=github_headers(body, "gh-secret")
        )
        assert response.json["status"] == "accepted"
    assert repeats(runtime, github) == 0

    sendgrid, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    body = batch(event("sg-1"), event("sg-2", kind="open"))
    headers = sendgrid_headers(PRIVATE[OLD], body, int(runtime.clock().timestamp()))
    response = post_json(client, sendgrid, body, headers)
    assert [e["status"] for e in response.json["events"]] == ["accepted", "accepted"]
    assert repeats(runtime, sendgrid) == 0  # one body, two events, by design
