"""How Slack signs a test request (slack_sdk's own signer), for the conformance kit and
the tests, with Slack's documented example request kept as a test vector."""

import hashlib
import hmac
import json
from datetime import UTC, datetime
from urllib.parse import urlencode

from slack_sdk.signature import SignatureVerifier

from hooklatch.testing import ProviderConformance
from tests.support.providers import without_content_type

SECRET = "slack-signing-secret"
FORM = "application/x-www-form-urlencoded"

# Slack's own example (docs.slack.dev "Verifying requests from Slack"), as kept in
# slackapi/python-slack-sdk tests/slack_sdk/signature/test_signature_verifier.py.
VECTOR_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
VECTOR_TIMESTAMP = "1531420618"
VECTOR_BODY = (
    b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow"
    b"&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner"
    b"&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands"
    b"%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
    b"&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
)
VECTOR_SIGNATURE = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"


def slack_headers(body: bytes, secret: str, *, now: datetime | None = None, form=False):
    """Headers as Slack sends them, signed by slack_sdk's own signer."""
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    try:
        signature = SignatureVerifier(secret).generate_signature(timestamp=timestamp, body=body)
    except UnicodeDecodeError:
        # slack_sdk signs text only; Slack's scheme is HMAC-SHA256 over the bytes.
        message = f"v0:{timestamp}:".encode() + body
        signature = "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()
    return {
        "Content-Type": FORM if form else "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": signature,
    }


def event_callback(event_id: str, *, text: str = "hello") -> bytes:
    payload = {
        "token": "legacy-token",
        "team_id": "T0001",
        "api_app_id": "A0001",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1700000000,
        "event": {"type": "app_mention", "user": "U0001", "text": text, "channel": "C0001"},
    }
    return json.dumps(payload, ensure_ascii=False).encode()


class SlackCase(ProviderConformance):
    provider = "slack"
    secret, other_secret = "slack-conformance-old", "slack-conformance-new"
    signature_headers = ("X-Slack-Signature",)
    signs_timestamp = True
    form_encoded = True

    def sign(self, body, *, secret, now, url):
        return without_content_type(slack_headers(body, secret, now=now))

    def event_body(self, event_id, *, note="hello"):
        return event_callback(event_id, text=note)

    def form_event_body(self, event_id):
        fields = {"command": "/deploy", "text": "hello", "trigger_id": event_id}
        return urlencode({"team_id": "T0001", "user_id": "U0001", **fields}).encode()
