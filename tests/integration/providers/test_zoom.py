"""Zoom through the real endpoint: the URL validation handshake, retries, the sample event."""

from datetime import UTC, datetime

from tests.support.database import stored_for
from tests.support.pipeline import make_endpoint
from tests.support.providers.zoom import (
    EVENT_TS,
    SECRET,
    encrypted,
    meeting_started,
    url_validation,
    zoom_headers,
)


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
    assert stored_for(runtime, endpoint) == 0


def test_a_badly_signed_url_validation_is_refused_and_not_answered(client, runtime):
    endpoint, _ = make_endpoint(runtime, "zoom", secrets=[SECRET])
    body = url_validation("qgg8vlvZRS6UYooatFL8Aw")
    headers = zoom_headers(body, "an-attackers-guess")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert b"encryptedToken" not in response.data
    assert stored_for(runtime, endpoint) == 0


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
