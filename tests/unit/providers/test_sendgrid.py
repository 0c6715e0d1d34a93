"""SendGrid's conformance cases, the sendgrid SDK's vector and its verifier, run against
the provider itself."""

from datetime import UTC, datetime, timedelta

import pytest
from sendgrid.helpers.eventwebhook import EventWebhook

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.sendgrid import (
    NEW,
    OLD,
    PRIVATE,
    SDK_KEY,
    SDK_PAYLOAD,
    SDK_SIGNATURE,
    SDK_TIMESTAMP,
    SIGNATURE,
    TIMESTAMP,
    SendGridCase,
    batch,
    event,
    sendgrid_headers,
)


class TestSendGridConformance(SendGridCase):
    pass


def sdk_delivery(body=SDK_PAYLOAD, signature=SDK_SIGNATURE):
    headers = {SIGNATURE.lower(): signature, TIMESTAMP.lower(): str(SDK_TIMESTAMP)}
    return Delivery("POST", "https://hooks.example.test/hooks/ep_1", headers, body)


def refusal(delivery, secrets, now):
    with pytest.raises(VerificationError) as refused:
        load_providers()["sendgrid"].verify(delivery, secrets=secrets, now=now)
    return refused.value.reason


def test_sendgrid_sdk_vector_verifies_with_a_fixed_clock():
    provider = load_providers()["sendgrid"]
    signed_at = datetime.fromtimestamp(SDK_TIMESTAMP, UTC)
    provider.verify(sdk_delivery(), secrets=[SDK_KEY], now=signed_at + timedelta(seconds=10))
    events = provider.parse(sdk_delivery())
    assert [(e.external_id, e.type) for e in events] == [
        ("ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA", "dropped")
    ]
    assert events[0].occurred_at == datetime.fromtimestamp(1600112492, UTC)
    # The SDK's own refusals: another key, another payload, another signature.
    assert refusal(sdk_delivery(), [OLD], signed_at) == "bad_signature"
    assert refusal(sdk_delivery(body=b"payload"), [SDK_KEY], signed_at) == "bad_signature"
    other = (
        "MEUCIQCtIHJeH93Y+qpYeWrySphQgpNGNr/U+UyUlBkU6n7RAwIgJTz2C+8a8xonZGi6BpSzoQsbVRamr2nl"
        "xFDWYNH3j/0="
    )
    assert refusal(sdk_delivery(signature=other), [SDK_KEY], signed_at) == "bad_signature"
    # Genuine, but replayed after the tolerance.
    late = signed_at + provider.tolerance + timedelta(seconds=1)
    assert refusal(sdk_delivery(), [SDK_KEY], late) == "stale_timestamp"


def test_the_test_signer_agrees_with_the_sendgrid_sdk_verifier():
    body = batch(event("c2VuZGdyaWQtdGVzdA"))
    headers = sendgrid_headers(PRIVATE[OLD], body, 1763726400)
    verifier = EventWebhook(OLD)
    assert verifier.verify_signature(body.decode(), headers[SIGNATURE], headers[TIMESTAMP])
    assert not EventWebhook(NEW).verify_signature(
        body.decode(), headers[SIGNATURE], headers[TIMESTAMP]
    )
