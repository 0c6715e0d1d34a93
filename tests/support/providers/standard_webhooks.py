"""How Standard Webhooks signs a test request, for the conformance kit and the tests: v1
signed by the standardwebhooks package, v1a signed with an Ed25519 key of cryptography's,
and the spec's own vector."""

import base64
import hashlib
import json
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.support.providers import SignsWithEachSecret
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


def signed(secret, body, *, message_id="msg_1", prefix="webhook", now=None):
    now = now or datetime.now(UTC)
    return {
        f"{prefix}-id": message_id,
        f"{prefix}-timestamp": str(int(now.timestamp())),
        f"{prefix}-signature": sdk_v1(secret, message_id, now, body),
    }


class StandardWebhooksCase(SignsWithEachSecret):
    provider = "standard-webhooks"
    secret, other_secret = whsec("conformance-old"), whsec("conformance-new")
    signature_headers = ("webhook-signature",)
    signs_timestamp = True
    message_id = "msg_no_event_body"  # set by event_body: the id travels in a header

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


class StandardWebhooksEd25519Case(StandardWebhooksCase):
    """v1a: the endpoint stores whpk_ public keys; requests are signed with the private key."""

    secret, other_secret = OLD_KEY, NEW_KEY
    private_keys = {OLD_KEY: OLD_PRIVATE, NEW_KEY: NEW_PRIVATE}

    def entry(self, secret, message_id, now, body):
        return v1a(self.private_keys[secret], message_id, now, body)
