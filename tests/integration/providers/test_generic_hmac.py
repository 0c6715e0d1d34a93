"""generic-hmac through the real endpoint: a GitHub-style configuration signed by githubkit,
a missing id header, and options refused when the endpoint is created."""

import hashlib
import hmac
import json

import pytest
from githubkit.webhooks import sign as hub_sign

from hooklatch.errors import BadRequest
from tests.support.pipeline import make_endpoint
from tests.support.providers.generic_hmac import SQUARE_LIKE, STRIPE_LIKE


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
