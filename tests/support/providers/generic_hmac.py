"""generic-hmac through the conformance kit in two configurations, signed with the stdlib
(and githubkit for a GitHub-style configuration), plus option validation."""

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime

import pytest
from githubkit.webhooks import sign as hub_sign

from hooklatch.errors import BadRequest
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import make_endpoint
from tests.support.conformance import HttpConformance

STRIPE_LIKE = {
    "header": "X-Acme-Signature",
    "prefix": "sha256=",
    "signed": "timestamp.body",
    "timestamp_header": "X-Acme-Timestamp",
    "id_header": "X-Acme-Delivery",
    "type_field": "type",
}
SQUARE_LIKE = {
    "header": "X-Beta-Signature",
    "algorithm": "sha512",
    "encoding": "base64",
    "signed": "url+body",
    "id_field": "event.id",
    "type_header": "X-Beta-Event",
}


class TestGenericHmacTimestampConformance(HttpConformance):
    """Hex SHA-256 with a prefix over ``timestamp.body``; id in a header, type in the body."""

    provider = "generic-hmac"
    secret = "acme-secret-old"
    other_secret = "acme-secret-new"
    signature_headers = ("X-Acme-Signature",)
    signs_timestamp = True
    options = STRIPE_LIKE
    delivery_id = "no-event-body"  # set by event_body: the id travels in a header

    def sign(self, body, *, secret, now, url):
        stamp = int(now.timestamp())
        digest = hmac.new(secret.encode(), b"%d." % stamp + body, hashlib.sha256).hexdigest()
        return {
            "X-Acme-Signature": f"sha256={digest}",
            "X-Acme-Timestamp": str(stamp),
            "X-Acme-Delivery": self.delivery_id,
        }

    def event_body(self, event_id, *, note="hello"):
        self.delivery_id = event_id
        return json.dumps({"type": "order.paid", "note": note}, ensure_ascii=False).encode()


class TestGenericHmacUrlConformance(HttpConformance):
    """Base64 SHA-512 over the public URL and the body; id in the body, type in a header."""

    provider = "generic-hmac"
    secret = "beta-secret-old"
    other_secret = "beta-secret-new"
    signature_headers = ("X-Beta-Signature",)
    options = SQUARE_LIKE

    def sign(self, body, *, secret, now, url):
        digest = hmac.new(secret.encode(), url.encode() + body, hashlib.sha512).digest()
        return {
            "X-Beta-Signature": base64.b64encode(digest).decode(),
            "X-Beta-Event": "shipment.sent",
        }

    def event_body(self, event_id, *, note="hello"):
        payload = {"event": {"id": event_id, "note": note}}
        return json.dumps(payload, ensure_ascii=False).encode()


def test_a_github_style_configuration_verifies_githubkit_signatures(client, runtime):
    """Intercom's scheme (sha1= hex over the body) through generic-hmac, signed by githubkit."""
    options = {
        "header": "X-Hub-Signature",
        "algorithm": "sha1",
        "prefix": "sha1=",
        "id_field": "id",
        "type_field": "topic",
    }
    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=["client-secret"], options=options)
    body = json.dumps({"id": 1234, "topic": "conversation.user.created"}).encode()
    headers = {"X-Hub-Signature": hub_sign("client-secret", body, method="sha1")}
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == "1234"
    headers["X-Hub-Signature"] = headers["X-Hub-Signature"].upper().replace("SHA1=", "sha1=")
    again = client.post(f"/hooks/{endpoint}", data=body, headers=headers)  # upper-case hex
    assert again.json["status"] == "duplicate"
    missing = client.post(
        f"/hooks/{endpoint}",
        data=b'{"topic": "ping"}',
        headers={"X-Hub-Signature": hub_sign("client-secret", b'{"topic": "ping"}', "sha1")},
    )
    assert (missing.status_code, missing.json["error"]) == (400, "malformed_body")


def test_a_delivery_without_its_id_header_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=["s"], options=STRIPE_LIKE)
    body = b'{"type": "order.paid"}'
    stamp = int(runtime.clock().timestamp())
    digest = hmac.new(b"s", b"%d." % stamp + body, hashlib.sha256).hexdigest()
    headers = {"X-Acme-Signature": f"sha256={digest}", "X-Acme-Timestamp": str(stamp)}
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"id_header": "X-Id"}, "'header'"),
        ({**STRIPE_LIKE, "algorithm": "md5"}, "'algorithm'"),
        ({**STRIPE_LIKE, "encoding": "base32"}, "'encoding'"),
        ({**STRIPE_LIKE, "signed": "body+url"}, "'signed'"),
        ({**STRIPE_LIKE, "header": "X Acme"}, "'header'"),
        ({k: v for k, v in STRIPE_LIKE.items() if k != "timestamp_header"}, "'timestamp_header'"),
        ({**SQUARE_LIKE, "timestamp_header": "X-Time"}, "'timestamp_header'"),
        ({**STRIPE_LIKE, "tolerance_seconds": "five"}, "'tolerance_seconds'"),
        ({**SQUARE_LIKE, "tolerance_seconds": "60"}, "'tolerance_seconds'"),
        ({k: v for k, v in STRIPE_LIKE.items() if k != "id_header"}, "'id_header'"),
        ({**STRIPE_LIKE, "id_field": "id"}, "'id_field'"),
        ({**SQUARE_LIKE, "id_field": "event..id"}, "'id_field'"),
        ({**SQUARE_LIKE, "type_field": "type"}, "'type_field'"),
        ({**STRIPE_LIKE, "secret_header": "X-Secret"}, "'secret_header'"),
    ],
    ids=[
        "no-header",
        "unknown-algorithm",
        "unknown-encoding",
        "unknown-signed",
        "bad-header-name",
        "timestamp-without-header",
        "timestamp-header-without-timestamp",
        "tolerance-not-a-number",
        "tolerance-without-timestamp",
        "no-id",
        "two-ids",
        "bad-id-path",
        "two-types",
        "unknown-option",
    ],
)
def test_a_bad_option_is_refused_with_a_message_naming_it(runtime, options, named):
    with pytest.raises(BadRequest) as refused:
        make_endpoint(runtime, "generic-hmac", secrets=["s"], options=options)
    assert refused.value.reason == "bad_option"
    assert named in refused.value.message


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
