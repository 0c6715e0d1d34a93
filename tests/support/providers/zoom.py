"""Zoom through the conformance kit and the real endpoint.

Zoom publishes no signer, in Python or elsewhere: requests are signed with the
standard library as Zoom documents the scheme (``v0:{timestamp}:{body}``).
"""

import hashlib
import hmac
import json
from datetime import UTC, datetime

from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

SECRET = "zoom-secret-token"
EVENT_TS = 1700000000123


def zoom_headers(body: bytes, secret: str, *, now: datetime | None = None):
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    message = f"v0:{timestamp}:".encode() + body
    return {
        "Content-Type": "application/json",
        "x-zm-request-timestamp": timestamp,
        "x-zm-signature": "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest(),
    }


def meeting_started(uuid: str, *, topic: str = "hello", event_ts: int = EVENT_TS) -> bytes:
    payload = {
        "event": "meeting.started",
        "event_ts": event_ts,
        "payload": {
            "account_id": "AAAAAABBBB",
            "object": {"id": "85746065432", "uuid": uuid, "topic": topic, "type": 2},
        },
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def url_validation(plain_token: str) -> bytes:
    payload = {
        "event": "endpoint.url_validation",
        "event_ts": EVENT_TS,
        "payload": {"plainToken": plain_token},
    }
    return json.dumps(payload).encode()


class TestZoomConformance(HttpConformance):
    provider = "zoom"
    secret = "zoom-conformance-old"
    other_secret = "zoom-conformance-new"
    signature_headers = ("x-zm-signature",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        headers = zoom_headers(body, secret, now=now)
        del headers["Content-Type"]
        return headers

    def event_body(self, event_id, *, note="hello"):
        return meeting_started(event_id, topic=note)

    def expected_ids(self, event_id):
        return (f"meeting.started:{EVENT_TS}:{event_id}",)


def stored(runtime, endpoint):
    return count(runtime, "SELECT count(*) FROM events WHERE endpoint_id = :e", e=endpoint)


def encrypted(secret: str, plain_token: str) -> str:
    return hmac.new(secret.encode(), plain_token.encode(), hashlib.sha256).hexdigest()


def test_url_validation_is_answered_with_the_tokens_hmac_once_the_signature_verifies(
    client, runtime
):
    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[SECRET])
    body = url_validation("qgg8vlvZRS6UYooatFL8Aw")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=zoom_headers(body, SECRET))
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.json == {
        "plainToken": "qgg8vlvZRS6UYooatFL8Aw",
        "encryptedToken": encrypted(SECRET, "qgg8vlvZRS6UYooatFL8Aw"),
    }
    assert stored(runtime, endpoint) == 0


def test_a_badly_signed_url_validation_is_refused_and_not_answered(client, runtime):
    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[SECRET])
    body = url_validation("qgg8vlvZRS6UYooatFL8Aw")
    headers = zoom_headers(body, "an-attackers-guess")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert b"encryptedToken" not in response.data
    assert stored(runtime, endpoint) == 0


def test_during_a_rotation_url_validation_is_keyed_by_the_secret_that_signed(client, runtime):
    old, new = "zoom-old-token", "zoom-new-token"
    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[old, new])
    for secret in (old, new):
        body = url_validation(f"plain-{secret}")
        response = client.post(f"/hooks/{endpoint}", data=body, headers=zoom_headers(body, secret))
        assert response.status_code == 200
        assert response.json["encryptedToken"] == encrypted(secret, f"plain-{secret}")


def test_a_retried_event_is_a_duplicate_and_another_object_is_not(client, runtime):
    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[SECRET])
    statuses = []
    for uuid in ("4444AAAiAAAAAiAiAiiAii==", "4444AAAiAAAAAiAiAiiAii==", "5555BBB=="):
        body = meeting_started(uuid)
        response = client.post(f"/hooks/{endpoint}", data=body, headers=zoom_headers(body, SECRET))
        statuses.append(response.json["status"])
    assert statuses == ["accepted", "duplicate", "accepted"]
    with runtime.engine.connect() as c:
        row = c.exec_driver_sql("SELECT type, occurred_at FROM events LIMIT 1").one()
    assert row.type == "meeting.started"
    assert row.occurred_at == datetime.fromtimestamp(EVENT_TS / 1000, UTC)


def test_the_sample_event_signed_by_the_provider_is_accepted(client, runtime):
    from hooklatch.providers.base import Delivery

    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[SECRET])
    provider, now = runtime.provider("zoom"), datetime.now(UTC)
    headers, body = provider.sample_event(now=now)
    headers.update(provider.sign(Delivery("POST", "", {}, body), secret=SECRET, now=now))
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 200, response.json
    assert response.json["status"] == "accepted"
