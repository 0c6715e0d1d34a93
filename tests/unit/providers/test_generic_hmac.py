"""generic-hmac's conformance cases in two configurations and its own test signature, run
against the provider itself."""

import json
from datetime import UTC, datetime

import pytest

from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.generic_hmac import (
    SQUARE_LIKE,
    STRIPE_LIKE,
    GenericHmacTimestampCase,
    GenericHmacUrlCase,
)


class TestGenericHmacTimestampConformance(GenericHmacTimestampCase):
    pass


class TestGenericHmacUrlConformance(GenericHmacUrlCase):
    pass


@pytest.mark.parametrize("options", [STRIPE_LIKE, SQUARE_LIKE], ids=["timestamp", "url"])
def test_its_own_test_signature_verifies(options):
    """`hooklatch send-test` signs with the endpoint's configuration."""
    provider = load_providers()["generic-hmac"]
    now = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
    _, body = provider.sample_event(now=now)
    body = json.dumps({**json.loads(body), "event": {"id": "e1"}}).encode()
    url = "https://hooks.example.test/hooks/ep_1"
    delivery = Delivery("POST", url, {}, body, options)
    signed = provider.sign(delivery, secret="s", now=now)
    received = Delivery("POST", url, {k.lower(): v for k, v in signed.items()}, body, options)
    provider.verify(received, secrets=["s"], now=now)
    assert len(provider.parse(received)) == 1
