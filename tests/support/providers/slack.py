"""Slack through the conformance kit and the real endpoint, signed by slack_sdk."""

import hashlib
import hmac
import json
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from slack_sdk.signature import SignatureVerifier

from hooklatch import create_app
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

SECRET = "slack-signing-secret"
FORM = "application/x-www-form-urlencoded"

# Slack's own example (docs.slack.dev "Verifying requests from Slack"), as kept in
# slackapi/python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py.
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TIMESTAMP = "1531420618"
VECTOR_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    b"&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    b"&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    b"%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def slack_headers(body: bytes, secret: str, *, now: datetime | None = None, form=False):
    """Headers as Slack sends them, signed by slack_sdk's own signer."""
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    try:
        signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    except UnicodeDecodeError:
        # slack_sdk signs text only; Slack's scheme is HMAC-SHA256 over the bytes.
        message = f"v0:{timestamp}:".encode() + body
        signature = "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return {
        "Content-Type": FORM if form else "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


def event_callback(event_id: str, *, text: str = "hello") -> bytes:
    payload = {
        "token": "legacy-token",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1700000000,
        "event": {"type": "app_mention", "user": "U0001", "text": text, "channel": "C0001"},
    }
    return json.dumps(payload, ensure_ascii=False).encode()


class TestSlackConformance(HttpConformance):
    provider = "slack"
    secret = "slack-conformance-old"
    other_secret = "slack-conformance-new"
    signature_headers = ("X-Slack-Signature",)
    signs_timestamp = True
    form_encoded = True

    def sign(self, body, *, secret, now, url):
        headers = slack_headers(body, secret, now=now)
        del headers["Content-Type"]
        return headers

    def event_body(self, event_id, *, note="hello"):
        return event_callback(event_id, text=note)

    def form_event_body(self, event_id):
        fields = {"command": "/deploy", "text": "hello", "trigger_id": event_id}
        return urlencode({"team_id": "T0001", "user_id": "U0001", **fields}).encode()


def stored(runtime, endpoint):
    return count(runtime, "SELECT count(*) FROM events WHERE endpoint_id = :e", e=endpoint)


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
    assert stored(runtime, endpoint) == 0


def test_a_badly_signed_url_verification_is_refused_and_not_answered(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    body = json.dumps({"challenge": "not-for-you", "type": "url_verification"}).encode()
    headers = slack_headers(body, "someone-elses-secret")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 401
    assert response.json["error"] == "bad_signature"
    assert b"not-for-you" not in response.data
    assert stored(runtime, endpoint) == 0


@pytest.fixture
def at_vector_time(settings, router):
    """The app with its clock at the Slack docs example's timestamp."""
    now = datetime.fromtimestamp(int(VECTOR_TIMESTAMP), UTC)
    app = create_app(settings, router=router, clock=lambda: now)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


def test_the_slack_docs_example_verifies_and_is_stored_under_its_trigger_id(at_vector_time):
    client, runtime = at_vector_time
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[VECTOR_SECRET])
    headers = {
        "Content-Type": FORM,
        "X-Slack-Request-Timestamp": VECTOR_TIMESTAMP,
        "X-Slack-Signature": VECTOR_SIGNATURE,
    }
    response = client.post(f"/hooks/{endpoint}", data=VECTOR_BODY, headers=headers)
    assert response.status_code == 200, response.json
    (event,) = response.json["events"]
    assert event["external_id"] == "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "/webhook-collect"


def test_the_slack_docs_example_is_stale_today(client, runtime):
    endpoint, _ = make_endpoint(runtime, "slack", secrets=[VECTOR_SECRET])
    headers = {
        "Content-Type": FORM,
        "X-Slack-Request-Timestamp": VECTOR_TIMESTAMP,
        "X-Slack-Signature": VECTOR_SIGNATURE,
    }
    response = client.post(f"/hooks/{endpoint}", data=VECTOR_BODY, headers=headers)
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
    assert stored(runtime, endpoint) == 0


def test_the_sample_event_signed_by_the_provider_is_accepted(client, runtime):
    from hooklatch.providers.base import Delivery

    endpoint, _ = make_endpoint(runtime, "slack", secrets=[SECRET])
    provider, now = runtime.provider("slack"), datetime.now(UTC)
    headers, body = provider.sample_event(now=now)
    headers.update(provider.sign(Delivery("POST", "", {}, body), secret=SECRET, now=now))
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 200, response.json
    assert response.json["status"] == "accepted"
