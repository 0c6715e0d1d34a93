"""Linear through the conformance kit. Linear publishes no signer for Python (its SDK only
verifies), so requests are signed as its SDK's own tests do: HMAC-SHA256 of the raw body,
hex, with the standard library."""

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta

import pytest

from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

WEBHOOK_ID = "5c2a8a8e-6a1b-4f6e-9c55-3f0b2f2e9d11"
CREATED_AT = "2026-11-21T10:00:00.000Z"


def linear_signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def issue_event(
    entity_id: str, *, title="hello", sent_at: datetime | None = None, **extra
) -> bytes:
    payload = {
        "action": "create",
        "type": "Issue",
        "createdAt": CREATED_AT,
        "data": {"id": entity_id, "title": title},
        "url": f"https://linear.app/acme/issue/{entity_id}",
        "organizationId": "org-1",
        "webhookId": WEBHOOK_ID,
        **extra,
    }
    if sent_at is not None:
        payload["webhookTimestamp"] = ms(sent_at)
    return json.dumps(payload, ensure_ascii=False).encode()


class TestLinearConformance(HttpConformance):
    """The kit signs a body it built beforehand, so its time goes in the Linear-Timestamp
    header (what Linear's SDK falls back to); the body's own webhookTimestamp is tested below."""

    provider = "linear"
    secret = "lin_wh_conformance_old"
    other_secret = "lin_wh_conformance_new"
    signature_headers = ("Linear-Signature",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return {
            "Linear-Signature": linear_signature(secret, body),
            "Linear-Timestamp": str(ms(now)),
            "Linear-Event": "Issue",
        }

    def event_body(self, event_id, *, note="hello"):
        return issue_event(event_id, title=note)

    def expected_ids(self, event_id):
        return (f"{WEBHOOK_ID}:Issue:create:{event_id}:{CREATED_AT}",)


# -- the body's timestamp, the dedupe key, the type ---------------------------------------

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
