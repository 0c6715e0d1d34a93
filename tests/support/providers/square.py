"""How Square signs a test request, for the conformance kit and the tests, with the square
SDK's published vectors.

squareup can verify but not sign, so requests are signed with the stdlib and the SDK's
own ``verify_signature`` checks the signer."""

import base64
import hashlib
import hmac
import json

import pytest

from hooklatch.testing import ProviderConformance


def square_signature(key, url, body):
    digest = hmac.new(key.encode(), url.encode() + body, hashlib.sha256).digest()
    return base64.b64encode(digest).decode()


class SquareCase(ProviderConformance):
    provider = "square"
    secret, other_secret = "square-signature-key-old", "square-signature-key-new"
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
