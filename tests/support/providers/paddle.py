"""Paddle Billing through the conformance kit, signed by paddle-python-sdk's own
PaddleSignature.calculate_hmac; then Paddle's SDK test vectors at their own time."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from paddle_billing.Notifications import PaddleSignature

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import make_endpoint
from tests.support.conformance import HttpConformance

# PaddleHQ/paddle-python-sdk tests/Unit/Notification/test_Verifier.py: the fixture
# standard_payload.json, its header and its secret.
FIXTURE_SECRET = "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I"
FIXTURE_HEADER = "ts=1710498758;h1=558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744"
FIXTURE_BODY = (
    b'{"data":{"id":"ctm_01hs0tqf76sxmp7ba5e4mw1sc8","name":"John Doe",'
    b'"email":"blackhole+verification2@paddle.com","locale":"en",'
    b'"status":"active","created_at":"2024-03-15T10:32:37.862Z",'
    b'"updated_at":"2024-03-15T10:32:37.862Z","custom_data":null,'
    b'"import_meta":null,"marketing_consent":false},'
    b'"event_id":"evt_01hs0tqfme2xwb2hvwv87p8y3w",'
    b'"event_type":"customer.created",'
    b'"occurred_at":"2024-03-15T10:32:38.286848Z",'
    b'"notification_id":"ntf_01hs0tqfrhgkyp39x4wyvy7h6n"}'
)


def paddle_header(body: bytes, *, secrets, now: datetime) -> str:
    timestamp = int(now.timestamp())
    message = f"{timestamp}:".encode() + body
    entries = [PaddleSignature.calculate_hmac(s, message).hexdigest() for s in secrets]
    return ";".join([f"ts={timestamp}", *(f"h1={entry}" for entry in entries)])


class TestPaddleConformance(HttpConformance):
    provider = "paddle"
    secret = "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_conformanceOldSecret+x/y"
    other_secret = "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_conformanceNewSecret+x/y"
    signature_headers = ("Paddle-Signature",)
    signs_timestamp = True
    several_signatures = True

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)

    def sign_several(self, body, *, secrets, now, url):
        return {"Paddle-Signature": paddle_header(body, secrets=secrets, now=now)}

    def event_body(self, event_id, *, note="hello"):
        payload = {
            "event_id": event_id,
            "event_type": "transaction.completed",
            "occurred_at": "2026-11-21T10:00:00.123456Z",
            "notification_id": "ntf_01hs0tqfrhgkyp39x4wyvy7h6n",
            "data": {"id": "txn_1", "status": "completed", "custom_data": {"note": note}},
        }
        return json.dumps(payload, ensure_ascii=False).encode()


# -- Paddle's own vectors, checked against the provider at their own time -----------------


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


# -- through the endpoint ------------------------------------------------------------------


def test_a_replayed_notification_of_one_event_is_stored_once(client, runtime):
    """Each replay gets a new notification_id and a new signature; the event_id stays."""
    endpoint, _ = make_endpoint(runtime, "paddle", secrets=[FIXTURE_SECRET])
    original = json.loads(FIXTURE_BODY)
    replay = {**original, "notification_id": "ntf_01replayreplayreplayreplay"}
    now = datetime.now(UTC)
    statuses = []
    for payload, when in ((original, now - timedelta(seconds=30)), (replay, now)):
        body = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            "Paddle-Signature": paddle_header(body, secrets=[FIXTURE_SECRET], now=when),
        }
        response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
        assert response.status_code == 200, response.json
        statuses.append(response.json["status"])
    assert statuses == ["accepted", "duplicate"]
