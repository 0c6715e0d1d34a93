"""How Twilio signs a test request (twilio-python), for the conformance kit and the tests:
form posts and Event Streams' JSON posts, and the SDK's published vector inputs."""

import hashlib
import json
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

from twilio.request_validator import RequestValidator

from hooklatch.testing import ProviderConformance

TOKEN = "twilio-auth-token"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class FormParams(dict):
    """Form fields as twilio-python reads a Flask or Django multi-dict: ``getall``."""

    def __init__(self, pairs):
        super().__init__()
        for name, value in pairs:
            self.setdefault(name, []).append(value)

    def getall(self, name):
        return self[name]


def form_signature(token, url, body, algorithm=None):
    """X-Twilio-Signature for a form post, computed by twilio-python."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        text = body.decode("latin-1")  # refused as malformed before any signature matters
    params = FormParams(parse_qsl(text, keep_blank_values=True))
    return RequestValidator(token).compute_signature(url, params, algorithm)


def with_body_hash(url, body):
    """The URL Twilio calls for a JSON post: bodySHA256 computed by twilio-python."""
    try:
        digest = RequestValidator("unused").compute_hash(body.decode())
    except UnicodeDecodeError:  # compute_hash takes text; the scheme hashes the bytes
        digest = hashlib.sha256(body).hexdigest()
    return url + ("&" if "?" in url else "?") + "bodySHA256=" + digest


def message_callback(sid="SM0000000000000000000000000000000a", status="delivered", **extra):
    fields = {
        "AccountSid": "AC00000000000000000000000000000000",
        "MessageSid": sid,
        "SmsSid": sid,
        "MessageStatus": status,
        "SmsStatus": status,
        "From": "+15005550006",
        "To": "+15005550009",
        **extra,
    }
    return urlencode(fields).encode()


class TwilioCase(ProviderConformance):
    provider = "twilio"
    secret, other_secret = "twilio-token-old", "twilio-token-new"
    signature_headers = ("X-Twilio-Signature",)
    form_encoded = True
    content_type = "application/x-www-form-urlencoded"
    idempotency_token = "no-event-body"  # set by event_body: Twilio sends it in a header

    def sign(self, body, *, secret, now, url):
        return {
            "X-Twilio-Signature": form_signature(secret, url, body),
            "I-Twilio-Idempotency-Token": self.idempotency_token,
        }

    def event_body(self, event_id, *, note="hello"):
        self.idempotency_token = event_id
        return message_callback(status="received", Body=note)

    def form_event_body(self, event_id):
        return self.event_body(event_id)


class TwilioJsonCase(ProviderConformance):
    """Event Streams posts JSON: the URL carries bodySHA256, the signature covers the URL."""

    provider = "twilio"
    secret, other_secret = "twilio-token-old", "twilio-token-new"
    signature_headers = ("X-Twilio-Signature",)

    def sign(self, body, *, secret, now, url):
        self.signed_url = with_body_hash(url, body)
        return {
            "X-Twilio-Signature": RequestValidator(secret).compute_signature(self.signed_url, {})
        }

    def deliver(self, url, body, headers):
        return super().deliver(getattr(self, "signed_url", url), body, headers)

    def event_body(self, event_id, *, note="hello"):
        event = {
            "specversion": "1.0",
            "type": "com.twilio.messaging.message.delivered",
            "source": "/2010-04-01/Accounts/AC0/Messages/SM0.json",
            "id": event_id,
            "datacontenttype": "application/json",
            "time": "2026-11-21T12:00:00.000Z",
            "data": {"body": note},
        }
        return json.dumps([event], ensure_ascii=False).encode()


# twilio/twilio-python tests/unit/test_request_validator.py
SDK_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
SDK_PARAMS = urlencode(
    {
        "CallSid": "CA1234567890ABCDE",
        "Caller": "+14158675309",
        "Digits": "1234",
        "From": "+14158675309",
        "To": "+18005551212",
    }
).encode()
SDK_BODY = b'{"property": "value", "boolean": true}'
SDK_BODY_HASH = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"
