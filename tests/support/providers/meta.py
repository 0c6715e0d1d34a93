"""Meta through the conformance kit, signed by githubkit (the same sha256= scheme), plus the
subscription GET handshake and the dedupe keys of batched deliveries."""

import json

import pytest
from githubkit.webhooks import sign as hub_sign

from hooklatch.errors import BadRequest
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from hooklatch.testing import json_body
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

APP_SECRET = "meta-app-secret"
VERIFY_TOKEN = "meta-verify-token"


def whatsapp(*messages, statuses=()):
    value = {"messaging_product": "whatsapp", "metadata": {"phone_number_id": "106540352242922"}}
    if messages:
        value["messages"] = list(messages)
    if statuses:
        value["statuses"] = list(statuses)
    return {
        "object": "whatsapp_business_account",
        "entry": [{"id": "102290129340398", "changes": [{"field": "messages", "value": value}]}],
    }


def text_message(wamid, text="hello"):
    return {
        "from": "15550000001",
        "id": wamid,
        "timestamp": "1763726400",
        "type": "text",
        "text": {"body": text},
    }


class TestMetaConformance(HttpConformance):
    provider = "meta"
    secret = "meta-app-secret-old"
    other_secret = "meta-app-secret-new"
    signature_headers = ("X-Hub-Signature-256",)
    options = {"verify_token": VERIFY_TOKEN}

    def sign(self, body, *, secret, now, url):
        return {"X-Hub-Signature-256": hub_sign(secret, body, method="sha256")}

    def event_body(self, event_id, *, note="hello"):
        return json_body(whatsapp(text_message(event_id, note)))  # unicode escaped, as Meta


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


def test_messenger_entries_yield_one_event_per_messaging_item():
    provider = load_providers()["meta"]
    payload = {
        "object": "page",
        "entry": [
            {
                "id": "PAGE_1",
                "time": 1763726400123,
                "messaging": [
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400000,
                        "message": {"mid": "m_AAA", "text": "hi"},
                    },
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400001,
                        "message": {"mid": "m_ECHO", "is_echo": True, "text": "hello"},
                    },
                    {
                        "sender": {"id": "PSID_1"},
                        "timestamp": 1763726400002,
                        "read": {"watermark": 1},
                    },
                ],
            },
            {
                "id": "PAGE_1",
                "time": 1763726401,
                "changes": [{"field": "feed", "value": {"item": "post", "verb": "add"}}],
            },
        ],
    }
    events = provider.parse(Delivery("POST", "https://h.test/hooks/ep", {}, json_body(payload)))
    ids = [e.external_id for e in events]
    assert [e.type for e in events] == [
        "page.messages",
        "page.message_echoes",
        "page.message_reads",
        "page.feed",
    ]
    assert ids[:2] == ["m_AAA", "m_ECHO"]
    assert ids[2].startswith("PAGE_1:1763726400123:message_reads:")
    assert ids[3].startswith("PAGE_1:1763726401:feed:")
    assert events[0].occurred_at.timestamp() == 1763726400
    # The same item re-sent in another batch gets the same key; another item does not.
    again = provider.parse(
        Delivery("POST", "https://h.test/hooks/ep", {}, json.dumps(payload, indent=2).encode())
    )
    assert [e.external_id for e in again] == ids
    payload["entry"][1]["changes"][0]["value"]["verb"] = "edited"
    changed = provider.parse(Delivery("POST", "https://h.test/hooks/ep", {}, json_body(payload)))
    assert changed[3].external_id != ids[3]


@pytest.mark.parametrize(
    "body",
    [b'{"object": "page"}', b'{"object": "page", "entry": []}', b'{"entry": [{"id": "1"}]}'],
    ids=["no-entry", "empty-entry", "no-object"],
)
def test_a_meta_body_without_object_and_entries_is_malformed(client, meta_endpoint, body):
    response = post(client, meta_endpoint, body)
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
