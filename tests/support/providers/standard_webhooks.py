"""Standard Webhooks through the conformance kit: v1 signed by the standardwebhooks package,
v1a signed with an Ed25519 key of cryptography's; then the spec's vector, the svix- headers,
Supabase's secret form and the entries the reference library crashes on."""

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from standardwebhooks import Webhook

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance
from tests.support.signing import standard_webhooks_v1 as sdk_v1
from tests.support.signing import whsec

# standard-webhooks/standard-webhooks libraries/python/tests/test_webhooks.py::test_sign_function
# (the same vector in svix/svix-webhooks python/tests/test_webhooks.py).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def ed25519_pair(seed: str) -> tuple[str, Ed25519PrivateKey]:
    """A whpk_ public key (what the endpoint stores) and the private key that signs."""
    private = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(seed.encode()).digest())
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "whpk_" + base64.b64encode(raw).decode(), private


def v1a(private: Ed25519PrivateKey, message_id: str, now: datetime, body: bytes) -> str:
    content = f"{message_id}.{int(now.timestamp())}.".encode() + body
    return "v1a," + base64.b64encode(private.sign(content)).decode()


def event(event_type="user.created", **extra) -> bytes:
    return json.dumps({"type": event_type, "data": {"id": "user_1", **extra}}).encode()


class TestStandardWebhooksConformance(HttpConformance):
    provider = "standard-webhooks"
    secret = whsec("conformance-old")
    other_secret = whsec("conformance-new")
    signature_headers = ("webhook-signature",)
    signs_timestamp = True
    several_signatures = True
    message_id = "msg_no_event_body"  # set by event_body: the id travels in a header

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)

    def sign_several(self, body, *, secrets, now, url):
        return {
            "webhook-id": self.message_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": " ".join(
                self.entry(secret, self.message_id, now, body) for secret in secrets
            ),
        }

    def entry(self, secret, message_id, now, body):
        return sdk_v1(secret, message_id, now, body)

    def event_body(self, event_id, *, note="hello"):
        self.message_id = event_id
        payload = {"type": "user.created", "data": {"id": "user_1", "first_name": note}}
        return json.dumps(payload, ensure_ascii=False).encode()


OLD_KEY, OLD_PRIVATE = ed25519_pair("conformance-ed25519-old")
NEW_KEY, NEW_PRIVATE = ed25519_pair("conformance-ed25519-new")


class TestStandardWebhooksEd25519Conformance(TestStandardWebhooksConformance):
    """v1a: the endpoint stores whpk_ public keys; requests are signed with the private key."""

    secret = OLD_KEY
    other_secret = NEW_KEY
    private_keys = {OLD_KEY: OLD_PRIVATE, NEW_KEY: NEW_PRIVATE}

    def entry(self, secret, message_id, now, body):
        return v1a(self.private_keys[secret], message_id, now, body)


# -- the provider itself, at a fixed time ------------------------------------------------


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


# -- through the endpoint ------------------------------------------------------------------


def post(client, endpoint, body, headers):
    return client.post(
        f"/hooks/{endpoint}", data=body, headers={"Content-Type": "application/json", **headers}
    )


def signed(secret, body, *, message_id="msg_1", prefix="webhook", now=None):
    now = now or datetime.now(UTC)
    return {
        f"{prefix}-id": message_id,
        f"{prefix}-timestamp": str(int(now.timestamp())),
        f"{prefix}-signature": sdk_v1(secret, message_id, now, body),
    }


def test_svix_headers_are_accepted_and_deduplicated_on_svix_id(client, runtime):
    secret = whsec("svix")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event("invoice.paid")
    first = post(client, endpoint, body, signed(secret, body, message_id="msg_svix", prefix="svix"))
    again = post(client, endpoint, body, signed(secret, body, message_id="msg_svix", prefix="svix"))
    assert first.status_code == 200, first.json
    assert first.json["events"][0]["external_id"] == "msg_svix"
    assert again.json["status"] == "duplicate"
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "invoice.paid"


def test_supabase_secret_form_is_accepted_through_the_endpoint(client, runtime):
    secret = whsec("supabase")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=["v1," + secret])
    body = event("before-user-created")
    response = post(client, endpoint, body, signed(secret, body))
    assert response.status_code == 200, response.json


def test_v1a_is_accepted_next_to_a_v1_entry_from_an_unknown_secret(client, runtime):
    public, private = ed25519_pair("mixed")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[public])
    body, now = event(), datetime.now(UTC)
    headers = signed(whsec("someone-else"), body, now=now)
    headers["webhook-signature"] += " " + v1a(private, "msg_1", now, body)
    response = post(client, endpoint, body, headers)
    assert response.status_code == 200, response.json


def test_a_garbage_entry_in_the_list_still_verifies_through_the_good_one(client, runtime):
    secret = whsec("garbage")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = signed(secret, body)
    good = headers["webhook-signature"]
    headers["webhook-signature"] = f"v1,not*base64! nocomma v1,{'A' * 43}= v2,abc {good}"
    # The reference library raises on the first bad entry instead of reading on.
    with pytest.raises(ValueError):  # binascii.Error is a ValueError
        Webhook(secret).verify(body, headers)
    response = post(client, endpoint, body, headers)
    assert response.status_code == 200, response.json


@pytest.mark.parametrize("header", ["nocomma", "v1,@@@@ v1a,", "v2,abc", "v1,"])
def test_a_signature_header_with_no_readable_entry_is_malformed(client, runtime, header):
    secret = whsec("unreadable")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = {**signed(secret, body), "webhook-signature": header}
    response = post(client, endpoint, body, headers)
    assert (response.status_code, response.json["error"]) == (400, "malformed_header")
    assert count(runtime, "SELECT count(*) FROM events") == 0


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp"])
def test_a_missing_id_or_timestamp_header_is_refused(client, runtime, missing):
    secret = whsec("missing")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = {k: v for k, v in signed(secret, body).items() if k != missing}
    response = post(client, endpoint, body, headers)
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


def test_an_endpoint_whose_secret_is_not_a_key_says_so(client, runtime):
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=["not a whsec secret!"])
    body = event()
    response = post(client, endpoint, body, signed(whsec("any"), body))
    assert (response.status_code, response.json["error"]) == (401, "no_secret")


@pytest.mark.parametrize(
    ("body", "event_type"),
    [
        (b'{"type":"email.sent","data":{}}', "email.sent"),
        (b'{"data":{}}', "webhook"),
        (b"[1]", "webhook"),
    ],
)
def test_the_event_type_is_the_body_type_or_webhook(client, runtime, body, event_type):
    secret = whsec("types")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    response = post(client, endpoint, body, signed(secret, body))
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == event_type
