"""SendGrid through the conformance kit, plus the sendgrid SDK's vector and verifier.

SendGrid keeps its private key, so tests sign with P-256 keys of their own (cryptography)
and the endpoint holds the public half, as it holds SendGrid's; the SDK's EventWebhook
verifier confirms that the test signer makes what SendGrid makes."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sendgrid.helpers.eventwebhook import EventWebhook

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


def public_key_text(private_key, encoding=serialization.Encoding.DER):
    """The public key as SendGrid's console shows it: base64 DER SubjectPublicKeyInfo."""
    blob = private_key.public_key().public_bytes(
        encoding, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return (
        blob.decode() if encoding == serialization.Encoding.PEM else base64.b64encode(blob).decode()
    )


KEYS = [ec.derive_private_key(n, ec.SECP256R1()) for n in (0x5E4D6121, 0x5E4D6122)]
PRIVATE = {public_key_text(key): key for key in KEYS}
OLD, NEW = PRIVATE


def sendgrid_headers(private_key, body, timestamp):
    signature = private_key.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {SIGNATURE: base64.b64encode(signature).decode(), TIMESTAMP: str(timestamp)}


def batch(*events):
    """A body as SendGrid posts it: one event per line, CRLF between, CRLF at the end."""
    lines = [json.dumps(event, ensure_ascii=False, separators=(",", ":")) for event in events]
    return ("[" + ",\r\n".join(lines) + "]\r\n").encode()


def event(sg_event_id, kind="delivered", **extra):
    return {
        "email": "someone@example.com",
        "event": kind,
        "sg_event_id": sg_event_id,
        "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filter0001",
        "timestamp": 1763726400,
        **extra,
    }


class TestSendGridConformance(HttpConformance):
    provider = "sendgrid"
    secret = OLD  # the endpoint holds public keys; tests sign with the private halves
    other_secret = NEW
    signature_headers = (SIGNATURE,)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return sendgrid_headers(PRIVATE[secret], body, int(now.timestamp()))

    def event_body(self, event_id, *, note="hello"):
        return batch(event(event_id, category=[note]))


# -- sendgrid/sendgrid-python test/unit/test_eventwebhook.py --------------------------------

SDK_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRq"
    "e62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
)
SDK_SIGNATURE = (
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M"
    "15TluLtEZtM="
)
SDK_TIMESTAMP = 1600112502
SDK_PAYLOAD = (
    json.dumps(
        [
            {
                "email": "hello@world.com",
                "event": "dropped",
                "reason": "Bounced Address",
                "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                "sg_message_id": (
                    "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0"
                ),
                "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                "timestamp": 1600112492,
            }
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    + "\r\n"
).encode()


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


def post(client, runtime, endpoint, body, key=OLD):
    headers = sendgrid_headers(PRIVATE[key], body, int(runtime.clock().timestamp()))
    headers["Content-Type"] = "application/json"
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def test_a_batch_of_n_events_stores_n_and_resending_it_stores_none(client, runtime):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    body = batch(
        event("ZGVsaXZlcmVkLTE", "processed"),
        event("ZGVsaXZlcmVkLTI", "delivered"),
        event("b3Blbi0z", "open", useragent="Mozilla/5.0 🎉"),
    )
    first = post(client, runtime, endpoint, body)
    assert first.status_code == 200, first.json
    assert first.json["status"] == "accepted"
    assert [e["status"] for e in first.json["events"]] == ["accepted"] * 3
    again = post(client, runtime, endpoint, body)
    assert again.json["status"] == "duplicate"
    assert [e["status"] for e in again.json["events"]] == ["duplicate"] * 3
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    assert [tuple(r) for r in rows] == [
        ("ZGVsaXZlcmVkLTE", "processed"),
        ("ZGVsaXZlcmVkLTI", "delivered"),
        ("b3Blbi0z", "open"),
    ]
    assert count(runtime, "SELECT count(*) FROM outbox") == 3


def test_a_retry_batched_with_a_new_event_stores_only_the_new_one(client, runtime):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    post(client, runtime, endpoint, batch(event("ZXZ0LTE"), event("ZXZ0LTI")))
    response = post(client, runtime, endpoint, batch(event("ZXZ0LTI"), event("ZXZ0LTM")))
    assert response.json["status"] == "accepted"
    assert [e["status"] for e in response.json["events"]] == ["duplicate", "accepted"]
    assert count(runtime, "SELECT count(*) FROM events") == 3


def test_an_event_without_sg_event_id_is_keyed_on_its_content(client, runtime):
    """SendGrid's "Test Your Integration" posts events without sg_event_id."""
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    body = batch({"email": "example@test.com", "timestamp": 1337197600, "event": "processed"})
    assert post(client, runtime, endpoint, body).json["status"] == "accepted"
    assert post(client, runtime, endpoint, body).json["status"] == "duplicate"
    with runtime.engine.connect() as connection:
        external_id = connection.exec_driver_sql("SELECT external_id FROM events").scalar_one()
    assert external_id.startswith("sha256:")


def test_a_pem_public_key_is_accepted_and_a_secret_that_is_no_key_is_named(client, runtime):
    pem = public_key_text(KEYS[0], serialization.Encoding.PEM)
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[pem])
    assert post(client, runtime, endpoint, batch(event("cGVt"))).status_code == 200
    broken, _ = make_endpoint(runtime, "sendgrid", secrets=["not a public key"])
    response = post(client, runtime, broken, batch(event("YnJva2Vu")))
    assert (response.status_code, response.json["error"]) == (401, "bad_secret")


@pytest.mark.parametrize(
    "body",
    [b'{"event": "delivered", "sg_event_id": "x"}', b"[]", b'[{"sg_event_id": "x"}]'],
    ids=["object", "empty-array", "no-event-field"],
)
def test_a_body_that_is_not_an_array_of_events_is_malformed(client, runtime, body):
    endpoint, _ = make_endpoint(runtime, "sendgrid", secrets=[OLD])
    response = post(client, runtime, endpoint, body)
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
