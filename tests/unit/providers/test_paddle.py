"""Paddle's conformance cases and Paddle's SDK test vectors at their own time, run against
the provider itself."""

from datetime import UTC, datetime

import pytest

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.paddle import (
    FIXTURE_BODY,
    FIXTURE_HEADER,
    FIXTURE_SECRET,
    PaddleCase,
)


class TestPaddleConformance(PaddleCase):
    pass


def plugin():
    return load_providers()["paddle"]


def at(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


def delivery(header: str, body: bytes) -> Delivery:
    return Delivery(
        "POST", "https://hooks.example.test/hooks/ep", {"paddle-signature": header}, body
    )


def test_the_sdk_fixture_vector_verifies_and_parses():
    vector = delivery(FIXTURE_HEADER, FIXTURE_BODY)
    plugin().verify(vector, secrets=[FIXTURE_SECRET], now=at(1710498758))
    [incoming] = plugin().parse(vector)
    assert (incoming.external_id, incoming.type) == (
        "evt_01hs0tqfme2xwb2hvwv87p8y3w",
        "customer.created",
    )
    assert incoming.occurred_at == datetime(2024, 3, 15, 10, 32, 38, 286848, tzinfo=UTC)


def test_the_sdk_rotation_vector_verifies_with_a_dummy_h1_and_wrong_secrets_beside():
    """test_Verifier.py: a dummy h1 before the real one; two wrong secrets before the right."""
    header = (
        "ts=1696195954;h1=dummy;h1=d96299976a6eb066f484d7fde011ac56fc32b38fc9940bc419d6e537fdc6ef02"
    )
    secrets = [
        "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_TjIG2BXbm83HPXqNfziwe506sBEdqL/4",
        "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_vB/yIOnTOCWIvpBadM5jzBZPHc7OmdSo",
        "pdl_ntf_01hbpjmytsa32fhr36nqgc3kgb_WvRO0eL4Bj9rgYYIBZY6wZhG4EHy9jzh",
    ]
    plugin().verify(delivery(header, b"hello-world"), secrets=secrets, now=at(1696195954))
    with pytest.raises(VerificationError) as refused:
        plugin().verify(delivery(header, b"hello-world"), secrets=secrets[:2], now=at(1696195954))
    assert refused.value.reason == "bad_signature"


def test_the_node_sdk_vector_verifies():
    """PaddleHQ/paddle-node-sdk webhooks-validator.node.test.ts."""
    header = "ts=1698796800;h1=a300428748dce5c70e4da19bffd60769591ea969c99dea3105d0ec9612cf43f9"
    vector = delivery(header, b'{"data": ["1", "2"]}')
    plugin().verify(vector, secrets=["VALID_SECRET"], now=at(1698796800))


def test_the_fixture_vector_is_refused_outside_five_minutes_but_not_after_five_seconds():
    vector = delivery(FIXTURE_HEADER, FIXTURE_BODY)
    plugin().verify(vector, secrets=[FIXTURE_SECRET], now=at(1710498758 + 60))  # SDKs: 5 s
    with pytest.raises(VerificationError) as refused:
        plugin().verify(vector, secrets=[FIXTURE_SECRET], now=at(1710498758 + 301))
    assert refused.value.reason == "stale_timestamp"


@pytest.mark.parametrize("header", ["h1=abc", "ts=1710498758", "ts=soon;h1=abc", "garbage"])
def test_a_header_without_ts_and_h1_is_malformed(header):
    with pytest.raises(VerificationError) as refused:
        plugin().verify(delivery(header, FIXTURE_BODY), secrets=["s"], now=at(1710498758))
    assert refused.value.reason == "malformed_header"
