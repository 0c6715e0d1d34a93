"""Destinations over the admin API: added, listed, shown, changed, paused and resumed,
removed, their forwards replayed; every answer checked against the description. A secret
setting (a URL with its token, a signing secret, a broker's password) is in no answer, log
record or audit row, and in the stored row only encrypted."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime

import pytest
from sqlalchemy import insert, select

from hooklatch.forwarding.models import Forward
from tests.support.database import count
from tests.support.pipeline import deliver, make_endpoint
from tests.support.provider_apis import stored_nowhere

HTTP_URL = "https://hooks.example.net/in?token=tok_url_secret_5b1e77"
SIGNING_SECRET = "whsec_Zm9yd2FyZGluZy1zaWduaW5nLXNlY3JldC04YzJkNDE="
ROTATED_URL = "https://hooks.example.net/v2?token=tok_rotated_secret_0a9f3c"
ROTATED_SECRET = "whsec_Zm9yd2FyZGluZy1yb3RhdGVkLXNlY3JldC02ZTdiMjA="
NATS_URL = "nats://forwarder:nats_password_31f9aa@nats.example.net:4222"
SECRETS = [HTTP_URL, SIGNING_SECRET, ROTATED_URL, ROTATED_SECRET, NATS_URL]
# What a secret setting is recognised by, should it be stored or shown in part.
SECRET_PARTS = ["tok_url_secret_5b1e77", "tok_rotated_secret_0a9f3c", "nats_password_31f9aa"]


def http_body(name: str = "warehouse", **more: object) -> dict[str, object]:
    return {
        "name": name,
        "kind": "http",
        "settings": {"url": HTTP_URL, "signing_secret": SIGNING_SECRET},
        **more,
    }


def stored_rows(runtime) -> str:
    """Every destination row as it is stored (its ciphertext as the bytes it is)."""
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT * FROM destinations").mappings().all()
    return repr(
        [{k: bytes(v) if isinstance(v, memoryview) else v for k, v in r.items()} for r in rows]
    )


def assert_encrypted_only(runtime) -> None:
    stored = stored_rows(runtime)
    assert "ciphertext" in stored
    for secret in SECRETS + SECRET_PARTS:
        assert secret not in stored


def audit_actions(runtime) -> list[str]:
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT action FROM audit_log ORDER BY id")
        return [action for (action,) in rows]


def seed_forwards(runtime, destination_id: str, statuses: Mapping[int, str]) -> None:
    """Forward rows for these events, in these states, written directly: what a replay
    chooses among, however forwards came to be."""
    now = datetime.now(UTC)
    rows = [
        {
            "destination_id": destination_id,
            "event_id": event_id,
            "status": status,
            "attempts": 0 if status == "pending" else 7,
            "last_error": "connection refused" if status == "dead" else None,
            "created_at": now,
            "delivered_at": now if status == "delivered" else None,
        }
        for event_id, status in statuses.items()
    ]
    with runtime.session_factory.begin() as session:
        session.execute(insert(Forward), rows)


def forward_states(runtime, destination_id: str) -> dict[int, tuple[str, int, str | None]]:
    with runtime.session_factory() as session:
        rows = session.execute(
            select(Forward.event_id, Forward.status, Forward.attempts, Forward.last_error).where(
                Forward.destination_id == destination_id
            )
        )
        return {event_id: (status, attempts, error) for event_id, status, attempts, error in rows}


# Through every operation.


def test_a_destination_goes_through_every_change_and_never_answers_a_secret(api, runtime, caplog):
    caplog.set_level(logging.DEBUG)
    endpoint, _ = make_endpoint(runtime, name="billing")
    answers = []

    added = api.post(
        "/admin/destinations",
        json=http_body(
            filter={"endpoint": "billing", "types": ["invoice.*"]},
            rate_limit=5,
            requested_by="ann",
        ),
    )
    answers.append(added)
    assert added.status_code == 201, added.json
    body = added.json
    assert added.headers["Location"] == f"/admin/destinations/{body['id']}"
    assert (body["name"], body["kind"], body["paused"]) == ("warehouse", "http", False)
    assert body["connection"] == "https://hooks.example.net/in"
    assert body["filter"] == {"endpoint_id": endpoint, "provider": None, "types": ["invoice.*"]}
    assert body["rate_limit"] == 5
    assert_encrypted_only(runtime)

    listed = api.get("/admin/destinations")
    answers.append(listed)
    [row] = listed.json["destinations"]
    assert row["id"] == body["id"] and row["forwards"]["pending"] == 0
    by_name, by_id = (api.get(f"/admin/destinations/{ref}") for ref in ("warehouse", body["id"]))
    answers += [by_name, by_id]
    assert by_name.json == by_id.json == row

    narrowed = api.open(
        "patch", "/admin/destinations/warehouse", json={"filter": {"types": ["charge.*"]}}
    )
    answers.append(narrowed)
    assert narrowed.json["filter"] == {
        "endpoint_id": endpoint,  # left out: as it was
        "provider": None,
        "types": ["charge.*"],
    }
    assert narrowed.json["rate_limit"] == 5

    rotated = api.open(
        "patch",
        f"/admin/destinations/{body['id']}",
        json={
            "settings": {"url": ROTATED_URL, "signing_secret": ROTATED_SECRET},
            "filter": {"endpoint": None, "provider": "stripe"},
            "rate_limit": None,
        },
    )
    answers.append(rotated)
    assert rotated.status_code == 200, rotated.json
    assert rotated.json["connection"] == "https://hooks.example.net/v2"
    assert rotated.json["fingerprint"] != body["fingerprint"]
    assert rotated.json["filter"] == {
        "endpoint_id": None,
        "provider": "stripe",
        "types": ["charge.*"],
    }
    assert rotated.json["rate_limit"] is None
    assert_encrypted_only(runtime)

    paused = api.post("/admin/destinations/warehouse/pause")
    again = api.post("/admin/destinations/warehouse/pause")
    resumed = api.post("/admin/destinations/warehouse/resume", json={"requested_by": "bob"})
    answers += [paused, again, resumed]
    assert (paused.json["paused"], paused.json["changed"]) == (True, True)
    assert (again.json["paused"], again.json["changed"]) == (True, False)
    assert (resumed.json["paused"], resumed.json["changed"]) == (False, True)

    removed = api.delete("/admin/destinations/warehouse")
    answers.append(removed)
    assert removed.json["id"] == body["id"]
    gone = api.get(f"/admin/destinations/{body['id']}")
    assert (gone.status_code, gone.json["error"]) == (404, "unknown_destination")
    assert count(runtime, "SELECT count(*) FROM destinations") == 0

    # Every change audited once (a pause of a paused destination changes nothing).
    assert audit_actions(runtime) == [
        "destination.added",
        "destination.changed",
        "destination.changed",
        "destination.paused",
        "destination.resumed",
        "destination.removed",
    ]
    with runtime.engine.connect() as connection:
        actors = [a for (a,) in connection.exec_driver_sql("SELECT actor FROM audit_log")]
    assert actors[0].startswith("ann (") and actors[4].startswith("bob (")
    texts = [a.get_data(as_text=True) for a in answers]
    stored_nowhere(runtime, SECRETS + SECRET_PARTS, *texts, caplog.text)


def test_plain_settings_are_answered_and_secret_ones_are_not(api, runtime, caplog):
    caplog.set_level(logging.DEBUG)
    added = api.post(
        "/admin/destinations",
        json={
            "name": "orders-bus",
            "kind": "nats",
            "settings": {"url": NATS_URL, "subject": "hooks.orders"},
        },
    )
    assert added.status_code == 201, added.json
    assert added.json["settings"] == {"subject": "hooks.orders"}
    assert "nats.example.net" in added.json["connection"]
    assert_encrypted_only(runtime)
    stored_nowhere(
        runtime, [NATS_URL, "nats_password_31f9aa"], added.get_data(as_text=True), caplog.text
    )


# Refusals.


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (http_body(kind="carrier-pigeon"), 400, "unknown_kind"),
        (http_body(settings={"url": HTTP_URL}), 400, "bad_destination"),
        (http_body(settings={"signing_secret": SIGNING_SECRET}), 400, "bad_destination"),
        (http_body(settings=[HTTP_URL]), 400, "bad_destination"),
        (http_body(settings={"url": HTTP_URL, "signing_secret": 7}), 400, "bad_destination"),
        (http_body(name=""), 400, "bad_destination"),
        (http_body(name="x" * 300), 400, "bad_destination"),
        (http_body(rate_limit=0), 400, "bad_destination"),
        (http_body(rate_limit=-2.5), 400, "bad_destination"),
        (http_body(rate_limit="fast"), 400, "bad_destination"),
        (http_body(rate_limit=True), 400, "bad_destination"),
        (http_body(filter={"types": "invoice.*"}), 400, "bad_destination"),
        (http_body(filter={"colour": "red"}), 400, "bad_parameter"),
        (http_body(filter={"endpoint": "nosuch"}), 404, "not_found"),
        (http_body(colour="red"), 400, "bad_parameter"),
    ],
)
def test_a_destination_refused_as_sent_is_not_stored_and_its_secrets_not_answered(
    api, runtime, body, status, reason, caplog
):
    caplog.set_level(logging.DEBUG)
    answer = api.post("/admin/destinations", json=body)

    assert (answer.status_code, answer.json["error"]) == (status, reason)
    assert count(runtime, "SELECT count(*) FROM destinations") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0
    stored_nowhere(runtime, SECRETS, answer.get_data(as_text=True), caplog.text)


def test_a_second_destination_of_the_same_name_is_refused(api, runtime):
    assert api.post("/admin/destinations", json=http_body()).status_code == 201

    again = api.post("/admin/destinations", json=http_body())

    assert (again.status_code, again.json["error"]) == (409, "destination_exists")
    assert count(runtime, "SELECT count(*) FROM destinations") == 1
    assert audit_actions(runtime) == ["destination.added"]


def test_a_bad_rate_limit_or_an_empty_change_changes_nothing(api, runtime):
    added = api.post("/admin/destinations", json=http_body(rate_limit=3)).json

    refused = [
        api.open("patch", "/admin/destinations/warehouse", json=body)
        for body in ({"rate_limit": 0}, {"rate_limit": "NaN"}, {}, {"settings": {"url": HTTP_URL}})
    ]

    assert [(a.status_code, a.json["error"]) for a in refused] == [
        (400, "bad_destination"),
        (400, "bad_destination"),
        (400, "bad_parameter"),
        (400, "bad_destination"),
    ]
    assert api.get("/admin/destinations/warehouse").json["rate_limit"] == 3
    assert api.get("/admin/destinations/warehouse").json["fingerprint"] == added["fingerprint"]
    assert audit_actions(runtime) == ["destination.added"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", ""),
        ("patch", ""),
        ("delete", ""),
        ("post", "/pause"),
        ("post", "/resume"),
        ("post", "/replay"),
    ],
)
def test_an_unknown_destination_is_404_on_every_route(api, method, path):
    body = {"patch": {"rate_limit": 1}, "post": {"dry_run": True}}.get(method)
    if path in ("/pause", "/resume"):
        body = None

    answer = api.open(method, f"/admin/destinations/nosuch{path}", json=body)

    assert (answer.status_code, answer.json["error"]) == (404, "unknown_destination")


# Replays.


@pytest.fixture
def replayable(api, client, runtime):
    """A destination with forwards of five events: three dead (two invoice.paid, one
    charge.failed), one delivered, one pending. Returns its id and the events' ids."""
    endpoint, _ = make_endpoint(runtime, name="billing")
    types = ["invoice.paid", "invoice.paid", "charge.failed", "invoice.paid", "invoice.paid"]
    events = [deliver(client, endpoint, f"evt_{n}", event_type=t) for n, t in enumerate(types)]
    destination = api.post("/admin/destinations", json=http_body()).json["id"]
    statuses = ["dead", "dead", "dead", "delivered", "pending"]
    seed_forwards(runtime, destination, dict(zip(events, statuses, strict=True)))
    return destination, events


def test_a_replay_dry_run_counts_and_the_real_one_sets_forwards_pending_again(
    api, runtime, replayable
):
    """Forwards are seeded by SQL: the subject is which forwards a replay chooses and what
    it does to them, not how they came to be."""
    destination, events = replayable
    before = forward_states(runtime, destination)

    every_dead = api.post("/admin/destinations/warehouse/replay", json={"dry_run": True})
    invoices = api.post(
        "/admin/destinations/warehouse/replay", json={"dry_run": True, "type": "invoice.*"}
    )
    assert (every_dead.json["matched"], every_dead.json["replayed"]) == (3, 0)
    assert (invoices.json["matched"], invoices.json["dry_run"]) == (2, True)
    assert forward_states(runtime, destination) == before
    assert audit_actions(runtime) == ["destination.added"]

    replayed = api.post(
        f"/admin/destinations/{destination}/replay",
        json={"type": "invoice.*", "reason": "the warehouse is back", "requested_by": "ann"},
    )

    assert replayed.status_code == 200, replayed.json
    assert (replayed.json["matched"], replayed.json["replayed"]) == (2, 2)
    after = forward_states(runtime, destination)
    assert after[events[0]] == after[events[1]] == ("pending", 0, None)
    assert after[events[2]] == ("dead", 7, "connection refused")  # charge.failed: not chosen
    assert after[events[3]][0] == "delivered"
    with runtime.engine.connect() as connection:
        [(action, details)] = connection.exec_driver_sql(
            "SELECT action, details FROM audit_log WHERE action = 'destination.replayed'"
        )
    details = details if isinstance(details, dict) else json.loads(details)
    assert action == "destination.replayed"
    assert (details["reason"], details["replayed"], details["statuses"]) == (
        "the warehouse is back",
        2,
        ["dead"],
    )


def test_a_single_forward_is_replayed_by_its_event_and_status(api, runtime, replayable):
    destination, events = replayable

    one = api.post(
        "/admin/destinations/warehouse/replay",
        json={"event_ids": [events[3]], "statuses": ["delivered"], "reason": "lost downstream"},
    )
    none_since = api.post(
        "/admin/destinations/warehouse/replay",
        json={"since": "2999-01-01T00:00:00Z", "dry_run": True},
    )
    before_any = api.post(
        "/admin/destinations/warehouse/replay",
        json={"until": "2000-01-01T00:00:00", "dry_run": True},
    )

    assert (one.json["matched"], one.json["replayed"]) == (1, 1)
    assert forward_states(runtime, destination)[events[3]] == ("pending", 0, None)
    assert none_since.json["matched"] == before_any.json["matched"] == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"statuses": ["lost"], "dry_run": True}, "bad_replay_filter"),
        ({"statuses": [], "dry_run": True}, "bad_replay_filter"),
        ({"statuses": "dead", "dry_run": True}, "bad_replay_filter"),
        ({"since": "yesterday", "dry_run": True}, "bad_replay_filter"),
        ({"event_ids": ["evt_1"], "dry_run": True}, "bad_replay_filter"),
        ({"event_ids": [0], "dry_run": True}, "bad_replay_filter"),
        ({"type": 7, "dry_run": True}, "bad_replay_filter"),
        ({"dry_run": "yes"}, "bad_parameter"),
        ({}, "reason_required"),
        ({"reason": "x" * 1001}, "reason_too_long"),
        ({"colour": "red"}, "bad_parameter"),
    ],
)
def test_a_replay_refused_as_sent_changes_nothing(api, runtime, replayable, body, reason):
    destination, _ = replayable
    before = forward_states(runtime, destination)

    answer = api.post("/admin/destinations/warehouse/replay", json=body)

    assert (answer.status_code, answer.json["error"]) == (400, reason)
    assert forward_states(runtime, destination) == before
    assert audit_actions(runtime) == ["destination.added"]
