"""Twilio through the real endpoint: the public URL behind a proxy and its port quirk,
dedupe on the idempotency token or the resource's sid and status, Event Streams batches."""

import json
from dataclasses import replace
from urllib.parse import urlencode

import pytest
from twilio.request_validator import RequestValidator

from hooklatch import create_app
from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.providers.twilio import (
    NOW,
    TOKEN,
    form_signature,
    message_callback,
    with_body_hash,
)

INTERNAL = "http://10.1.2.3:8000"


@pytest.fixture
def proxied(settings, router):
    """hooklatch behind a proxy: Twilio calls https://hooks.example.com, the request
    reaches the app on an internal address."""
    app = create_app(replace(settings, public_url="https://hooks.example.com"), router=router)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


def test_twilio_signature_is_checked_against_the_public_url_behind_a_proxy(proxied):
    client, runtime = proxied
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    path = f"/hooks/{endpoint}?tenant=acme"
    body = message_callback()
    for public in (
        f"https://hooks.example.com{path}",
        f"https://hooks.example.com:443{path}",  # the port quirk: either is Twilio's
    ):
        headers = {
            "X-Twilio-Signature": form_signature(TOKEN, public, body),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        response = client.post(path, data=body, headers=headers, base_url=INTERNAL)
        assert response.status_code == 200, response.json
    # Signed for the address the app sees itself: not what Twilio signed, so refused.
    headers["X-Twilio-Signature"] = form_signature(TOKEN, INTERNAL + path, body)
    response = client.post(path, data=body, headers=headers, base_url=INTERNAL)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert count(runtime, "SELECT count(*) FROM events") == 1


def post_form(client, runtime, endpoint, body, **headers):
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    headers = {
        "X-Twilio-Signature": form_signature(TOKEN, url, body),
        "Content-Type": "application/x-www-form-urlencoded",
        **headers,
    }
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def stored(runtime):
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    return [tuple(row) for row in rows]


def test_twilio_retry_with_the_same_idempotency_token_is_a_duplicate(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    body = message_callback(status="sent")
    token = {"I-Twilio-Idempotency-Token": "9a1b2c3d-retry"}
    first = post_form(client, runtime, endpoint, body, **token)
    again = post_form(client, runtime, endpoint, body, **token)
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")
    assert stored(runtime) == [("9a1b2c3d-retry", "message.sent")]


def test_twilio_without_a_token_dedupes_on_the_resource_sid_and_status(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    sent, delivered = message_callback(status="sent"), message_callback(status="delivered")
    call = urlencode(
        {
            "AccountSid": "AC0",
            "CallSid": "CA0000000000000000000000000000000b",
            "CallStatus": "completed",
            "SequenceNumber": "3",
            "Timestamp": "Sat, 21 Nov 2026 12:00:00 +0000",
        }
    ).encode()
    answers = [post_form(client, runtime, endpoint, b).json["status"] for b in (sent, delivered)]
    answers += [post_form(client, runtime, endpoint, b).json["status"] for b in (delivered, call)]
    assert answers == ["accepted", "accepted", "duplicate", "accepted"]
    assert stored(runtime) == [
        ("SM0000000000000000000000000000000a:sent", "message.sent"),
        ("SM0000000000000000000000000000000a:delivered", "message.delivered"),
        ("CA0000000000000000000000000000000b:completed:3", "call.completed"),
    ]
    occurred = count(
        runtime,
        "SELECT extract(epoch FROM occurred_at)::bigint FROM events WHERE type = :t",
        t="call.completed",
    )
    assert occurred == int(NOW.timestamp())  # the callback's Timestamp


def test_twilio_request_with_nothing_to_dedupe_on_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    response = post_form(client, runtime, endpoint, b"AccountSid=AC0&Foo=bar")
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
    assert stored(runtime) == []


def test_twilio_event_streams_batch_stores_one_event_per_cloud_event(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    events = [
        {
            "id": f"EZ{n}",
            "type": "com.twilio.messaging.message.sent",
            "time": "2026-11-21T12:00:00Z",
        }
        for n in range(3)
    ]
    body = json.dumps(events).encode()
    url = with_body_hash(f"{runtime.settings.public_url}/hooks/{endpoint}", body)
    headers = {
        "X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(url, {}),
        "Content-Type": "application/json",
    }
    path = url.removeprefix(runtime.settings.public_url)
    assert client.post(path, data=body, headers=headers).json["status"] == "accepted"
    assert client.post(path, data=body, headers=headers).json["status"] == "duplicate"
    assert [row[0] for row in stored(runtime)] == ["EZ0", "EZ1", "EZ2"]
