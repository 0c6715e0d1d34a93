"""Replays from the admin API: handlers run again, each replay recorded, the API guarded."""

from sqlalchemy import select

from hooklatch.events.models import Attempt, Replay
from hooklatch.metrics import REGISTRY
from tests.support.database import count, load_event
from tests.support.effects import effect_rows
from tests.support.pipeline import dead_then_fixed, deliver, drain, make_endpoint
from tests.support.tokens import ADMIN_TOKEN, AUTH

SECRET = "whsec_test_secret"


def test_replay_runs_handlers_again_and_is_recorded(client, runtime, router):
    _, event_id = dead_then_fixed(client, runtime, router, "evt_replayed", max_attempts=2)
    replays_before = replays_counted("succeeded")
    response = client.post(
        f"/admin/events/{event_id}/replay",
        json={"reason": "bug fixed in #123", "requested_by": "alice"},
        headers=AUTH,
    )
    assert response.status_code == 202, response.json
    replay_id = response.json["id"]
    drain(runtime)

    with runtime.session_factory() as session:
        replay = session.get(Replay, replay_id)
        assert replay.status == "succeeded"
        assert replay.reason == "bug fixed in #123"
        assert replay.requested_by.startswith("alice")
        attempt = session.scalars(select(Attempt).where(Attempt.replay_id == replay_id)).one()
        assert attempt.outcome == "succeeded"
    assert load_event(runtime, event_id).status == "processed"
    [row] = effect_rows(runtime, "evt_replayed")
    assert row.is_replay is True

    # A replay of an already processed event runs the handlers again too.
    response = client.post(
        f"/admin/events/{event_id}/replay", json={"reason": "again"}, headers=AUTH
    )
    assert response.status_code == 202
    drain(runtime)
    assert len(effect_rows(runtime, "evt_replayed")) == 2
    assert replays_counted("succeeded") == replays_before + 2


def replays_counted(outcome):
    """hooklatch_replays_total in this process (where drain runs the jobs)."""
    found = REGISTRY.get_sample_value("hooklatch_replays_total", {"outcome": outcome})
    return found or 0.0


def test_replay_requires_the_admin_token(client, runtime):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_guarded")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": ADMIN_TOKEN}):
        response = client.post(f"/admin/events/{event_id}/replay", json={}, headers=headers)
        assert (response.status_code, response.json["error"]) == (401, "unauthorized")
    assert count(runtime, "SELECT count(*) FROM replays") == 0


def test_admin_api_is_closed_when_no_token_is_configured(settings, router):
    from dataclasses import replace

    from hooklatch import create_app

    closed = create_app(replace(settings, admin_token=None), router=router)
    response = closed.test_client().get("/admin/events", headers={"Authorization": "Bearer "})
    assert response.json is not None
    assert (response.status_code, response.json["error"]) == (401, "admin_disabled")
    closed.extensions["hooklatch"].dispose()


def test_replay_of_unknown_event_is_404(client):
    response = client.post("/admin/events/999999/replay", json={}, headers=AUTH)
    assert response.status_code == 404
