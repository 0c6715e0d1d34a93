"""Meta through the real endpoint: the subscription GET handshake, the verify token kept
encrypted, and signed deliveries, batched ones stored once per message and status."""

import json

import pytest
from githubkit.webhooks import sign as hub_sign

from hooklatch.errors import BadRequest
from hooklatch.testing import json_body
from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.providers.meta import APP_SECRET, VERIFY_TOKEN, text_message, whatsapp

# -- the subscription handshake --------------------------------------------------------


def handshake(client, endpoint, **query):
    params = {"hub.mode": "subscribe", "hub.challenge": "1158201444", **query}
    return client.get(f"/hooks/{endpoint}", query_string=params)


def test_meta_challenge_is_answered_with_exactly_the_challenge_for_the_right_token(client, runtime):
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    response = handshake(client, endpoint, **{"hub.verify_token": VERIFY_TOKEN})
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    assert response.data == b"1158201444"
    odd = handshake(
        client, endpoint, **{"hub.verify_token": VERIFY_TOKEN, "hub.challenge": "a b&c"}
    )
    assert odd.data == b"a b&c"


@pytest.mark.parametrize(
    "query",
    [
        {"hub.verify_token": "not-the-token"},
        {"hub.verify_token": ""},
        {},
        {"hub.verify_token": VERIFY_TOKEN, "hub.mode": "unsubscribe"},
    ],
    ids=["wrong-token", "empty-token", "no-token", "not-subscribe"],
)
def test_meta_challenge_is_refused_with_403_otherwise(client, runtime, query):
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    response = handshake(client, endpoint, **query)
    assert (response.status_code, response.json["error"]) == (403, "bad_verify_token")
    assert b"1158201444" not in response.data
    refused = count(
        runtime,
        "SELECT count FROM refusals WHERE endpoint_id = :e AND reason = 'bad_verify_token'",
        e=endpoint,
    )
    assert refused == 1


def test_a_get_that_is_no_handshake_is_not_allowed(client, runtime):
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    assert client.get(f"/hooks/{endpoint}").status_code == 405


def test_meta_endpoint_needs_a_verify_token_and_keeps_it_encrypted(runtime):
    with pytest.raises(BadRequest, match="verify_token"):
        make_endpoint(runtime, "meta", secrets=[APP_SECRET])
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    with runtime.engine.connect() as connection:
        stored = connection.exec_driver_sql(
            "SELECT options FROM endpoints WHERE id = %(e)s", {"e": endpoint}
        ).scalar_one()
    assert stored["verify_token"].startswith("fernet:")
    assert VERIFY_TOKEN not in json.dumps(stored)


# -- signed deliveries -----------------------------------------------------------------


def post(client, endpoint, body, secret=APP_SECRET):
    headers = {
        "X-Hub-Signature-256": hub_sign(secret, body, method="sha256"),
        "Content-Type": "application/json",
    }
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


@pytest.fixture
def meta_endpoint(runtime):
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    return endpoint


def stored_events(runtime):
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    return [tuple(row) for row in rows]


def test_meta_signs_escaped_unicode_and_only_those_bytes_verify(client, runtime, meta_endpoint):
    payload = whatsapp(text_message("wamid.HBgLMTU1NTAwMDAwMDEVAgASGBQzQUVCMDk2", "héllo 🎉"))
    escaped = json.dumps(payload).encode()
    assert b"\\ud83c\\udf89" in escaped
    signature = hub_sign(APP_SECRET, escaped, method="sha256")
    reserialized = json.dumps(payload, ensure_ascii=False).encode()
    headers = {"X-Hub-Signature-256": signature, "Content-Type": "application/json"}
    refused = client.post(f"/hooks/{meta_endpoint}", data=reserialized, headers=headers)
    assert (refused.status_code, refused.json["error"]) == (401, "bad_signature")
    accepted = client.post(f"/hooks/{meta_endpoint}", data=escaped, headers=headers)
    assert accepted.status_code == 200, accepted.json


def test_one_whatsapp_request_with_several_messages_and_statuses_stores_each(
    client, runtime, meta_endpoint
):
    body = json_body(
        whatsapp(
            text_message("wamid.A"),
            text_message("wamid.B"),
            statuses=[
                {"id": "wamid.OUT", "status": "sent", "timestamp": "1763726400"},
                {"id": "wamid.OUT", "status": "delivered", "timestamp": "1763726401"},
            ],
        )
    )
    first = post(client, meta_endpoint, body)
    assert [e["status"] for e in first.json["events"]] == ["accepted"] * 4
    assert post(client, meta_endpoint, body).json["status"] == "duplicate"
    kind = "whatsapp_business_account.messages"
    assert stored_events(runtime) == [
        ("wamid.A", kind),
        ("wamid.B", kind),
        ("wamid.OUT:sent", kind),
        ("wamid.OUT:delivered", kind),
    ]


@pytest.mark.parametrize(
    "body",
    [b'{"object": "page"}', b'{"object": "page", "entry": []}', b'{"entry": [{"id": "1"}]}'],
    ids=["no-entry", "empty-entry", "no-object"],
)
def test_a_meta_body_without_object_and_entries_is_malformed(client, meta_endpoint, body):
    response = post(client, meta_endpoint, body)
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
