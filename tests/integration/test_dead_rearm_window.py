"""A duplicate of a dead event re-arms it only within the provider's retry window: GitHub
signs no time, so a delivery captured once could otherwise revive its event for ever."""

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.database import count, load_event
from tests.support.pipeline import make_endpoint
from tests.support.signing import github_headers

FIRST_SEEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WINDOW = timedelta(days=3)  # GitHubProvider.retry_window
BODY = json.dumps({"action": "opened", "issue": {"number": 3}}).encode()
HEADERS = github_headers(BODY, "gh-secret", event="issues", delivery="d-dead")


def kill(runtime, event_id):
    """As the worker leaves an event after its last failed attempt."""
    with runtime.engine.begin() as c:
        c.exec_driver_sql("UPDATE events SET status = 'dead', next_attempt_at = NULL")
        c.exec_driver_sql("DELETE FROM outbox")
    assert load_event(runtime, event_id).status == "dead"


def post_at(client_at, endpoint, now):
    client, _ = client_at(now)
    response = client.post(f"/hooks/{endpoint}", data=BODY, headers=HEADERS)
    assert response.status_code == 200, response.json
    return response.json


@pytest.mark.parametrize("later", [timedelta(hours=1), WINDOW - timedelta(seconds=1)])
def test_a_duplicate_of_a_dead_event_inside_the_retry_window_rearms_it(runtime, client_at, later):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    event_id = post_at(client_at, endpoint, FIRST_SEEN)["events"][0]["id"]
    kill(runtime, event_id)

    answer = post_at(client_at, endpoint, FIRST_SEEN + later)
    assert answer["status"] == "duplicate"
    assert answer["events"][0]["rearmed"] is True
    assert load_event(runtime, event_id).status == "pending"
    assert count(runtime, "SELECT count(*) FROM outbox") == 1


def test_a_duplicate_of_a_dead_event_after_the_retry_window_does_not_rearm_it(
    runtime, client_at, caplog
):
    caplog.set_level(logging.INFO)
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    event_id = post_at(client_at, endpoint, FIRST_SEEN)["events"][0]["id"]
    kill(runtime, event_id)

    answer = post_at(client_at, endpoint, FIRST_SEEN + WINDOW + timedelta(minutes=1))
    assert answer["status"] == "duplicate"
    assert "rearmed" not in answer["events"][0]
    assert load_event(runtime, event_id).status == "dead"
    assert count(runtime, "SELECT count(*) FROM outbox") == 0
    [why] = [r.getMessage() for r in caplog.records if "not re-armed" in r.getMessage()]
    assert "retry window" in why
    assert str(event_id) in why
