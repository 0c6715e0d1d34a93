"""Square through the conformance kit, plus the square SDK's vectors and verifier.

squareup can verify but not sign, so requests are signed with the stdlib and the SDK's
own ``verify_signature`` checks the signer."""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from square.utils.webhooks_helper import verify_signature

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def square_signature(key, url, body):
    digest = hmac.new(key.encode(), url.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class TestSquareConformance(HttpConformance):
    provider = "square"
    secret = "square-signature-key-old"
    other_secret = "square-signature-key-new"
    signature_headers = ("x-square-hmacsha256-signature",)

    def sign(self, body, *, secret, now, url):
        return {"x-square-hmacsha256-signature": square_signature(secret, url, body)}

    def event_body(self, event_id, *, note="hello"):
        payload = {
            "merchant_id": "MLEFBHHSJGVHD",
            "type": "payment.updated",
            "event_id": event_id,
            "created_at": "2026-11-21T12:00:00.123456789Z",
            "data": {"type": "payment", "id": "pay_1", "object": {"note": note}},
        }
        return json.dumps(payload, ensure_ascii=False).encode()


# square/square-python-sdk tests/integration/test_webhooks_helper.py
VECTORS = [
    pytest.param(
        "Ibxx_5AKakO-3qeNVR61Dw",
        "https://webhook.site/679a4f3a-dcfa-49ee-bac5-9d0edad886b9",
        b'{"merchant_id":"MLEFBHHSJGVHD","type":"webhooks.test_notification",'
        b'"event_id":"ac3ac95b-f97d-458c-a6e6-18981597e05f",'
        b'"created_at":"2022-07-13T20:30:59.037339943Z",'
        b'"data":{"type":"webhooks","id":"bc368e64-01aa-407e-b46e-3231809b1129"}}',
        "GF4YkrJgGBDZ9NIYbNXBnMzqb2HoL4RW/S6vkZ9/2N4=",
        id="test-notification",
    ),
    pytest.param(
        "signature-key",
        "https://webhook.site/webhooks",
        b'{"data":{"type":"webhooks","id":">id<"}}',
        "Cxt7+aTi4rKgcA0bC4g9EHdVtLSDWdqccmL5MvihU4U=",
        id="escaped",
    ),
]


def verify(key, url, body, signature):
    delivery = Delivery("POST", url, {"x-square-hmacsha256-signature": signature}, body)
    load_providers()["square"].verify(delivery, secrets=[key], now=NOW)


@pytest.mark.parametrize(("key", "url", "body", "signature"), VECTORS)
def test_square_sdk_vectors_verify_against_the_provider(key, url, body, signature):
    verify(key, url, body, signature)
    for wrong in ({"key": "MCmhFRxGX82xMwg5FsaoQA"}, {"url": url + "/"}, {"body": body + b" "}):
        args = {"key": key, "url": url, "body": body, **wrong}
        with pytest.raises(VerificationError) as refused:
            verify(args["key"], args["url"], args["body"], signature)
        assert refused.value.reason == "bad_signature"


@pytest.mark.parametrize(("key", "url", "body", "signature"), VECTORS)
def test_the_test_signer_agrees_with_the_square_sdk_verifier(key, url, body, signature):
    assert square_signature(key, url, body) == signature
    mine = square_signature(key, url, b'{"event_id":"e1","type":"t"}')
    assert verify_signature(
        request_body='{"event_id":"e1","type":"t"}',
        signature_header=mine,
        signature_key=key,
        notification_url=url,
    )


def test_square_event_is_stored_under_its_event_id_and_type(client, runtime):
    endpoint, _ = make_endpoint(runtime, "square", secrets=["sq-key"])
    body = VECTORS[0].values[2]
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    headers = {
        "x-square-hmacsha256-signature": square_signature("sq-key", url, body),
        "Content-Type": "application/json",
    }
    first = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    again = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")
    with runtime.engine.connect() as connection:
        row = connection.exec_driver_sql("SELECT external_id, type, occurred_at FROM events").one()
    assert row.external_id == "ac3ac95b-f97d-458c-a6e6-18981597e05f"
    assert row.type == "webhooks.test_notification"
    assert row.occurred_at == datetime(2022, 7, 13, 20, 30, 59, 37339, tzinfo=UTC)
    assert count(runtime, "SELECT count(*) FROM events") == 1


def test_square_signature_for_another_notification_url_is_refused(client, runtime):
    """Square signs the subscription's URL: the public one, not the app's own address."""
    endpoint, _ = make_endpoint(runtime, "square", secrets=["sq-key"])
    body = VECTORS[0].values[2]
    headers = {
        "x-square-hmacsha256-signature": square_signature(
            "sq-key", f"http://localhost/hooks/{endpoint}", body
        ),
        "Content-Type": "application/json",
    }
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
