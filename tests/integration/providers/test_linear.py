"""Linear through the real endpoint: the body's timestamp, the dedupe key, the type."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.providers.linear import (
    CREATED_AT,
    WEBHOOK_ID,
    issue_event,
    linear_signature,
    ms,
)

SECRET = "lin_wh_secret"


def post(client, endpoint, body, **headers):
    headers = {
        "Content-Type": "application/json",
        "Linear-Signature": linear_signature(SECRET, body),
        **headers,
    }
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


@pytest.fixture
def endpoint(runtime):
    endpoint_id, _ = make_endpoint(runtime, "linear", secrets=[SECRET])
    return endpoint_id


def test_the_signed_body_timestamp_wins_over_the_unsigned_header(client, endpoint):
    now = datetime.now(UTC)
    stale = issue_event("iss-1", sent_at=now - timedelta(minutes=5))
    response = post(client, endpoint, stale, **{"Linear-Timestamp": str(ms(now))})
    assert (response.status_code, response.json["error"]) == (401, "stale_timestamp")
    fresh = issue_event("iss-1", sent_at=now)
    old_header = str(ms(now - timedelta(hours=1)))
    response = post(client, endpoint, fresh, **{"Linear-Timestamp": old_header})
    assert response.status_code == 200, response.json


def test_the_tolerance_is_sixty_seconds_either_way(client, endpoint):
    now = datetime.now(UTC)
    for shift, reason in ((-90, "stale_timestamp"), (90, "future_timestamp")):
        body = issue_event("iss-2", sent_at=now + timedelta(seconds=shift))
        response = post(client, endpoint, body)
        assert (response.status_code, response.json["error"]) == (401, reason)
    response = post(client, endpoint, issue_event("iss-2", sent_at=now - timedelta(seconds=30)))
    assert response.status_code == 200, response.json


def test_a_retry_sent_later_is_a_duplicate_of_the_first_attempt(client, runtime, endpoint):
    now = datetime.now(UTC)
    first = post(client, endpoint, issue_event("iss-3", sent_at=now - timedelta(seconds=20)))
    retry = post(client, endpoint, issue_event("iss-3", sent_at=now))
    assert (first.json["status"], retry.json["status"]) == ("accepted", "duplicate")
    assert count(runtime, "SELECT count(*) FROM events") == 1
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()
    assert stored.external_id == f"{WEBHOOK_ID}:Issue:create:iss-3:{CREATED_AT}"
    assert stored.type == "Issue.create"
    assert stored.occurred_at == datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


def test_a_body_without_event_fields_is_keyed_on_linear_delivery(client, runtime, endpoint):
    now = datetime.now(UTC)
    body = json.dumps(
        {"type": "OAuthApp", "action": "revoked", "webhookTimestamp": ms(now)}
    ).encode()
    response = post(client, endpoint, body, **{"Linear-Delivery": "del-1"})
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == "del-1"
    response = post(client, endpoint, body)
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")


def test_without_any_timestamp_the_request_is_refused(client, endpoint):
    response = post(client, endpoint, issue_event("iss-4"))
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


@pytest.mark.parametrize("signature", ["sha256=abc", "z" * 64, "0" * 63])
def test_a_signature_that_is_not_hex_sha256_is_malformed(client, endpoint, signature):
    body = issue_event("iss-5", sent_at=datetime.now(UTC))
    response = post(client, endpoint, body, **{"Linear-Signature": signature})
    assert (response.status_code, response.json["error"]) == (400, "malformed_header")
