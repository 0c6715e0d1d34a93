"""Standard Webhooks' conformance cases (v1 and v1a), the spec's vector under either header
set, Supabase's secret form and unpadded secrets, run against the provider itself."""

import base64
from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks import Webhook

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.standard_webhooks import (
    SPEC_BODY,
    SPEC_ID,
    SPEC_SECRET,
    SPEC_SIGNATURE,
    SPEC_TIMESTAMP,
    StandardWebhooksCase,
    StandardWebhooksEd25519Case,
    event,
)


class TestStandardWebhooksConformance(StandardWebhooksCase):
    pass


class TestStandardWebhooksEd25519Conformance(StandardWebhooksEd25519Case):
    pass


def plugin():
    return load_providers()["standard-webhooks"]


def spec_delivery(prefix="webhook", signature=SPEC_SIGNATURE):
    headers = {
        f"{prefix}-id": SPEC_ID,
        f"{prefix}-timestamp": str(SPEC_TIMESTAMP),
        f"{prefix}-signature": signature,
    }
    return Delivery("POST", "https://hooks.example.test/hooks/ep", headers, SPEC_BODY)


@pytest.mark.parametrize("prefix", ["webhook", "svix"])
def test_the_spec_vector_verifies_at_its_own_time_under_either_header_set(prefix):
    at = datetime.fromtimestamp(SPEC_TIMESTAMP, UTC)
    delivery = spec_delivery(prefix)
    plugin().verify(delivery, secrets=[SPEC_SECRET], now=at)
    [incoming] = plugin().parse(delivery)
    assert (incoming.external_id, incoming.type) == (SPEC_ID, "webhook")  # {"test": ...}: no type
    with pytest.raises(VerificationError) as refused:
        plugin().verify(delivery, secrets=[SPEC_SECRET], now=at + timedelta(minutes=6))
    assert refused.value.reason == "stale_timestamp"


def test_the_spec_vector_with_a_changed_signature_is_refused():
    tampered = spec_delivery(signature=SPEC_SIGNATURE.replace("g0hM", "g0hN"))
    with pytest.raises(VerificationError) as refused:
        plugin().verify(
            tampered, secrets=[SPEC_SECRET], now=datetime.fromtimestamp(SPEC_TIMESTAMP, UTC)
        )
    assert refused.value.reason == "bad_signature"


def test_supabase_v1_whsec_secret_form_verifies_the_spec_vector():
    at = datetime.fromtimestamp(SPEC_TIMESTAMP, UTC)
    plugin().verify(spec_delivery(), secrets=["v1," + SPEC_SECRET], now=at)


def test_a_secret_without_its_base64_padding_is_accepted():
    unpadded = "whsec_" + base64.b64encode(b"twenty-three-bytes-long").decode().rstrip("=")
    at, body = datetime.now(UTC), event()
    headers = {
        "webhook-id": "msg_pad",
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": Webhook(unpadded).sign("msg_pad", at, body.decode()),
    }
    plugin().verify(Delivery("POST", "u", headers, body), secrets=[unpadded], now=at)
