"""Square's conformance cases and the square SDK's vectors, run against the provider itself."""

from datetime import UTC, datetime

import pytest
from square.utils.webhooks_helper import verify_signature

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.square import VECTORS, SquareCase, square_signature

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class TestSquareConformance(SquareCase):
    pass


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
