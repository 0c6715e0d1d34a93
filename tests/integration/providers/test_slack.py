"""Slack through the real endpoint: the URL verification and SSL check answered, Slack's
documented example at its own time and today, event callbacks, interactions and the
provider's own sample event."""

import json
from datetime import UTC, datetime
from urllib.parse import urlencode

from tests.support.database import stored_for
from tests.support.pipeline import make_endpoint
from tests.support.providers.slack import (
    FORM,
    SECRET,
    VECTOR_BODY,
    VECTOR_SECRET,
    VECTOR_SIGNATURE,
    VECTOR_TIMESTAMP,
    event_callback,
    slack_headers,
)


def test_url_verification_is_answered_with_its_challenge_once_the_signature_verifies(
    client, runtime
):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    body = json.dumps(
        {
            "token": "legacy",
            "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
            "type": "url_verification",
        }
    ).encode()
    response = client.post(f"/hooks/{endpoint}", data=body, headers=slack_headers(body, SECRET))
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.json == {"challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}
    assert stored_for(runtime, endpoint) == 0


def test_a_badly_signed_url_verification_is_refused_and_not_answered(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    body = json.dumps({"challenge": "not-for-you", "type": "url_verification"}).encode()
    headers = slack_headers(body, "someone-elses-secret")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 401
    assert response.json["error"] == "bad_signature"
    assert b"not-for-you" not in response.data
    assert stored_for(runtime, endpoint) == 0


VECTOR_HEADERS = {
    "Content-Type": FORM,
    "X-Slack-Request-Timestamp": VECTOR_TIMESTAMP,
    "X-Slack-Signature": VECTOR_SIGNATURE,
}


def test_the_slack_docs_example_verifies_and_is_stored_under_its_trigger_id(at_vector_time):
    client, runtime = at_vector_time
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[VECTOR_SECRET])
    response = client.post(f"/hooks/{endpoint}", data=VECTOR_BODY, headers=VECTOR_HEADERS)
    assert response.status_code == 200, response.json
    (event,) = response.json["events"]
    assert event["external_id"] == "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "/webhook-collect"


def test_the_slack_docs_example_is_stale_today(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[VECTOR_SECRET])
    response = client.post(f"/hooks/{endpoint}", data=VECTOR_BODY, headers=VECTOR_HEADERS)
    assert (response.status_code, response.json["error"]) == (401, "stale_timestamp")


def test_an_event_callback_is_typed_by_its_inner_event_and_a_retry_is_a_duplicate(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    body = event_callback("Ev0RETRY")
    first = client.post(f"/hooks/{endpoint}", data=body, headers=slack_headers(body, SECRET))
    retry = {**slack_headers(body, SECRET), "X-Slack-Retry-Num": "1"}
    second = client.post(f"/hooks/{endpoint}", data=body, headers=retry)
    assert (first.json["status"], second.json["status"]) == ("accepted", "duplicate")
    with runtime.engine.connect() as c:
        row = c.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()
    assert row[:2] == ("Ev0RETRY", "app_mention")
    assert row.occurred_at == datetime.fromtimestamp(1700000000, UTC)


def test_an_interaction_is_stored_under_its_trigger_id_and_typed_by_its_type(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    interaction = {
        "type": "block_actions",
        "trigger_id": "13345224609.738474920.8088930838d88f008e0",
        "user": {"id": "U0001"},
        "actions": [{"action_id": "approve", "value": "yes"}],
    }
    body = urlencode({"payload": json.dumps(interaction)}).encode()
    headers = slack_headers(body, SECRET, form=True)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        row = c.exec_driver_sql("SELECT external_id, type FROM events").one()
    assert tuple(row) == ("13345224609.738474920.8088930838d88f008e0", "block_actions")
    assert runtime.provider("slack").payload({"content-type": FORM}, body) == interaction


def test_an_ssl_check_is_answered_and_not_stored(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    body = b"ssl_check=1&token=legacy"
    response = client.post(
        f"/hooks/{endpoint}", data=body, headers=slack_headers(body, SECRET, form=True)
    )
    assert (response.status_code, response.data) == (200, b"")
    assert stored_for(runtime, endpoint) == 0
