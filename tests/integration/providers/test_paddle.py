"""Paddle through the real endpoint: a replayed notification of one event is stored once."""

import json
from datetime import UTC, datetime, timedelta

from tests.support.pipeline import make_endpoint
from tests.support.providers.paddle import FIXTURE_BODY, FIXTURE_SECRET, paddle_header


def test_a_replayed_notification_of_one_event_is_stored_once(client, runtime):
    """Each replay gets a new notification_id and a new signature; the event_id stays."""
    endpoint, _ = make_endpoint(runtime, "paddle", secrets=[FIXTURE_SECRET])
    original = json.loads(FIXTURE_BODY)
    replay = {**original, "notification_id": "ntf_01replayreplayreplayreplay"}
    now = datetime.now(UTC)
    statuses = []
    for payload, when in ((original, now - timedelta(seconds=30)), (replay, now)):
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "Paddle-Signature": paddle_header(body, secrets=[FIXTURE_SECRET], now=when),
        }
        response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
        assert response.status_code == 200, response.json
        statuses.append(response.json["status"])
    assert statuses == ["accepted", "duplicate"]
