"""SendGrid through the real endpoint: batches stored once per event, events without an
sg_event_id keyed on their content, PEM keys, and bodies that are no array of events."""

import pytest
from cryptography.hazmat.primitives import serialization

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.providers.sendgrid import (
    KEYS,
    OLD,
    PRIVATE,
    batch,
    event,
    public_key_text,
    sendgrid_headers,
)


def post(client, runtime, endpoint, body, key=OLD):
    headers = sendgrid_headers(PRIVATE[key], body, int(runtime.clock().timestamp()))
    headers["Content-Type"] = "application/json"
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def test_a_batch_of_n_events_stores_n_and_resending_it_stores_none(client, runtime):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    body = batch(
        event("ZGVsaXZlcmVkLTE", "processed"),
        event("ZGVsaXZlcmVkLTI", "delivered"),
        event("b3Blbi0z", "open", useragent="Mozilla/5.0 🎉"),
    )
    first = post(client, runtime, endpoint, body)
    assert first.status_code == 200, first.json
    assert first.json["status"] == "accepted"
    assert [e["status"] for e in first.json["events"]] == ["accepted"] * 3
    again = post(client, runtime, endpoint, body)
    assert again.json["status"] == "duplicate"
    assert [e["status"] for e in again.json["events"]] == ["duplicate"] * 3
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    assert [tuple(r) for r in rows] == [
        ("ZGVsaXZlcmVkLTE", "processed"),
        ("ZGVsaXZlcmVkLTI", "delivered"),
        ("b3Blbi0z", "open"),
    ]
    assert count(runtime, "SELECT count(*) FROM outbox") == 3


def test_a_retry_batched_with_a_new_event_stores_only_the_new_one(client, runtime):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    post(client, runtime, endpoint, batch(event("ZXZ0LTE"), event("ZXZ0LTI")))
    response = post(client, runtime, endpoint, batch(event("ZXZ0LTI"), event("ZXZ0LTM")))
    assert response.json["status"] == "accepted"
    assert [e["status"] for e in response.json["events"]] == ["duplicate", "accepted"]
    assert count(runtime, "SELECT count(*) FROM events") == 3


def test_an_event_without_sg_event_id_is_keyed_on_its_content(client, runtime):
    """SendGrid's "Test Your Integration" posts events without sg_event_id."""
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    body = batch({"email": "example@test.com", "timestamp": 1337197600, "event": "processed"})
    assert post(client, runtime, endpoint, body).json["status"] == "accepted"
    assert post(client, runtime, endpoint, body).json["status"] == "duplicate"
    with runtime.engine.connect() as connection:
        external_id = connection.exec_driver_sql("SELECT external_id FROM events").scalar_one()
    assert external_id.startswith("sha256:")


def test_a_pem_public_key_is_accepted_and_a_secret_that_is_no_key_is_named(client, runtime):
    pem = public_key_text(KEYS[0], serialization.Encoding.PEM)
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[pem])
    assert post(client, runtime, endpoint, batch(event("cGVt"))).status_code == 200
    broken, _ = make_endpoint(runtime, "sendgrid", secrets=["not a public key"])
    response = post(client, runtime, broken, batch(event("YnJva2Vu")))
    assert (response.status_code, response.json["error"]) == (401, "bad_secret")


@pytest.mark.parametrize(
    "body",
    [b'{"event": "delivered", "sg_event_id": "x"}', b"[]", b'[{"sg_event_id": "x"}]'],
    ids=["object", "empty-array", "no-event-field"],
)
def test_a_body_that_is_not_an_array_of_events_is_malformed(client, runtime, body):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    response = post(client, runtime, endpoint, body)
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
