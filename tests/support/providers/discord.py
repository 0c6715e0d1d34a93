"""Discord through the conformance kit and the real endpoint.

Discord signs with its own private key and publishes no signer; requests here are
signed with key pairs made by ``cryptography``, and the fixed vector below (PyNaCl,
seed of 32 zero bytes; both official discord-interactions verifiers accept it) checks
the provider against a signature we did not make.
"""

import hashlib
import json
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hooklatch import create_app
from hooklatch.providers.base import Delivery
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

VECTOR_PUBLIC_KEY = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
VECTOR_TIMESTAMP = "1700000000"
VECTOR_BODY = b'{"type":1}'
VECTOR_SIGNATURE = (
    "f2053542c8500e9bf6b68eb1efc69823f8c01c7718ab0353b125826418494b6e"
    "d523027cf852f54edf27d3d3e13f3de15968b6df027ae1fc5dcab21f0b7ff30c"
)

PRIVATE_KEYS: dict[str, Ed25519PrivateKey] = {}  # public key (hex) -> its private key


def key_pair() -> str:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes_raw().hex()
    PRIVATE_KEYS[public] = private
    return public


APP_KEY, OTHER_KEY = key_pair(), key_pair()


def discord_headers(body: bytes, public_key: str, *, now: datetime | None = None):
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    signature = PRIVATE_KEYS[public_key].sign(timestamp.encode() + body)
    return {
        "Content-Type": "application/json",
        "X-Signature-Ed25519": signature.hex(),
        "X-Signature-Timestamp": timestamp,
    }


def snowflake(name: str) -> str:
    return str(int.from_bytes(hashlib.sha256(name.encode()).digest()[:7], "big"))


def command(interaction_id: str, *, text: str = "hello") -> bytes:
    payload = {
        "id": interaction_id,
        "application_id": "1181000000000000000",
        "type": 2,
        "token": "interaction-token",
        "version": 1,
        "data": {
            "id": "1",
            "name": "echo",
            "type": 1,
            "options": [{"name": "text", "value": text}],
        },
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def webhook_event(user_id: str) -> bytes:
    payload = {
        "version": 1,
        "application_id": "1181000000000000000",
        "type": 1,
        "event": {
            "type": "APPLICATION_AUTHORIZED",
            "timestamp": "2024-10-18T14:42:53.064834",
            "data": {
                "integration_type": 1,
                "scopes": ["applications.commands"],
                "user": {"id": user_id, "username": "someone"},
            },
        },
    }
    return json.dumps(payload).encode()


class TestDiscordConformance(HttpConformance):
    provider = "discord"
    secret = APP_KEY
    other_secret = OTHER_KEY
    signature_headers = ("X-Signature-Ed25519",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        headers = discord_headers(body, secret, now=now)
        del headers["Content-Type"]
        return headers

    def event_body(self, event_id, *, note="hello"):
        return command(snowflake(event_id), text=note)

    def expected_ids(self, event_id):
        return (snowflake(event_id),)


def post(client, endpoint, body, headers):
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def stored(runtime, endpoint):
    return count(runtime, "SELECT count(*) FROM events WHERE endpoint_id = :e", e=endpoint)


def test_an_interactions_ping_is_answered_with_a_pong(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = b'{"type":1}'
    response = post(client, endpoint, body, discord_headers(body, APP_KEY))
    assert response.status_code == 200
    assert response.content_type == "application/json"
    assert response.json == {"type": 1}
    assert stored(runtime, endpoint) == 0


def test_a_webhook_events_ping_is_answered_204_with_no_body(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = b'{"version":1,"application_id":"1181000000000000000","type":0}'
    response = post(client, endpoint, body, discord_headers(body, APP_KEY))
    assert (response.status_code, response.data) == (204, b"")
    assert stored(runtime, endpoint) == 0


@pytest.mark.parametrize("body", [b'{"type":1}', b'{"type":0}'])
def test_discords_deliberately_bad_signatures_get_401(client, runtime, body):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    wrong_key = discord_headers(body, OTHER_KEY)
    garbage = {**discord_headers(body, APP_KEY), "X-Signature-Ed25519": "ab" * 64}
    for headers in (wrong_key, garbage):
        response = post(client, endpoint, body, headers)
        assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert stored(runtime, endpoint) == 0


@pytest.fixture
def at_vector_time(settings, router):
    now = datetime.fromtimestamp(int(VECTOR_TIMESTAMP), UTC)
    app = create_app(settings, router=router, clock=lambda: now)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


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
    response = post(client, endpoint, VECTOR_BODY, headers)
    assert (response.status_code, response.json) == (200, {"type": 1})
    flipped = {**headers, "X-Signature-Ed25519": VECTOR_SIGNATURE[:-1] + "d"}
    assert post(client, endpoint, VECTOR_BODY, flipped).status_code == 401


def test_an_interaction_is_stored_under_its_id_and_dated_by_its_snowflake(client, runtime):
    endpoint, _ = make_endpoint(runtime, "discord", secrets=[APP_KEY])
    body = command("1296854843367592048")
    response = post(client, endpoint, body, discord_headers(body, APP_KEY))
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
        statuses.append(post(client, endpoint, body, discord_headers(body, APP_KEY)).json["status"])
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
    response = post(client, endpoint, body, discord_headers(body, APP_KEY))
    assert (response.status_code, response.json["error"]) == (401, "no_secret")


def test_the_sample_event_parses_but_a_public_key_cannot_sign_it(runtime):
    provider, now = runtime.provider("discord"), datetime.now(UTC)
    headers, body = provider.sample_event(now=now)
    delivery = Delivery("POST", "", {k.lower(): v for k, v in headers.items()}, body)
    (event,) = provider.parse(delivery)
    assert event.type == "application_command"
    assert abs((event.occurred_at - now).total_seconds()) < 1
    with pytest.raises(ValueError, match="developer portal"):
        provider.sign(delivery, secret=APP_KEY, now=now)
