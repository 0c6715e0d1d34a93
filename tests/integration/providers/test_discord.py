"""Discord through the real endpoint: pings answered by the view, bad signatures
refused with 401, interactions and webhook events stored under their keys."""

from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.support.database import stored_for
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.discord import (
    APP_KEY,
    OTHER_KEY,
    VECTOR_BODY,
    VECTOR_PUBLIC_KEY,
    VECTOR_SIGNATURE,
    VECTOR_TIMESTAMP,
    command,
    discord_headers,
    webhook_event,
)


def test_an_interactions_ping_is_answered_with_a_pong(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = b'{"type":1}'
    response = post_json(client, endpoint, body, discord_headers(body, APP_KEY))
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.json == {"type": 1}
    assert stored_for(runtime, endpoint) == 0


def test_a_webhook_events_ping_is_answered_204_with_no_body(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = b'{"version":1,"application_id":"1181000000000000000","type":0}'
    response = post_json(client, endpoint, body, discord_headers(body, APP_KEY))
    assert (response.status_code, response.data) == (204, b"")
    assert stored_for(runtime, endpoint) == 0


@pytest.mark.parametrize("body", [b'{"type":1}', b'{"type":0}'])
def test_discords_deliberately_bad_signatures_get_401(client, runtime, body):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    wrong_key = discord_headers(body, OTHER_KEY)
    garbage = {**discord_headers(body, APP_KEY), "X-Signature-Ed25519": "ab" * 64}
    for headers in (wrong_key, garbage):
        response = post_json(client, endpoint, body, headers)
        assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert stored_for(runtime, endpoint) == 0


def test_the_zero_seed_vector_verifies_and_is_answered_with_a_pong(at_vector_time):
    client, runtime = at_vector_time
    seed_key = Ed25519PrivateKey.from_private_bytes(bytes(32)).public_key()
    assert seed_key.public_bytes_raw().hex() == VECTOR_PUBLIC_KEY
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[VECTOR_PUBLIC_KEY])
    headers = {
        "Content-Type": "application/json",
        "X-Signature-Ed25519": VECTOR_SIGNATURE,
        "X-Signature-Timestamp": VECTOR_TIMESTAMP,
    }
    response = post_json(client, endpoint, VECTOR_BODY, headers)
    assert (response.status_code, response.json) == (200, {"type": 1})
    flipped = {**headers, "X-Signature-Ed25519": VECTOR_SIGNATURE[:-1] + "d"}
    assert post_json(client, endpoint, VECTOR_BODY, flipped).status_code == 401


def test_an_interaction_is_stored_under_its_id_and_dated_by_its_snowflake(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = command("1296854843367592048")
    response = post_json(client, endpoint, body, discord_headers(body, APP_KEY))
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        row = c.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()
    assert row[:2] == ("1296854843367592048", "application_command")
    assert row.occurred_at == datetime(2024, 10, 18, 15, 18, 9, 56000, tzinfo=UTC)


def test_a_webhook_event_is_keyed_by_app_type_time_and_user_and_a_retry_is_a_duplicate(
    client, runtime
):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    statuses = []
    for user_id in ("1001", "1001", "1002"):
        body = webhook_event(user_id)
        statuses.append(
            post_json(client, endpoint, body, discord_headers(body, APP_KEY)).json["status"]
        )
    assert statuses == ["accepted", "duplicate", "accepted"]
    with runtime.engine.connect() as c:
        keys = c.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    assert [tuple(k) for k in keys] == [
        (
            "1181000000000000000:APPLICATION_AUTHORIZED:2024-10-18T14:42:53.064834:1001",
            "APPLICATION_AUTHORIZED",
        ),
        (
            "1181000000000000000:APPLICATION_AUTHORIZED:2024-10-18T14:42:53.064834:1002",
            "APPLICATION_AUTHORIZED",
        ),
    ]


def test_an_endpoint_secret_that_is_not_a_public_key_is_named(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=["not-a-public-key"])
    body = b'{"type":1}'
    response = post_json(client, endpoint, body, discord_headers(body, APP_KEY))
    assert (response.status_code, response.json["error"]) == (401, "no_secret")
