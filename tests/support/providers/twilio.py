"""Twilio through the conformance kit (form posts and JSON posts), signed by twilio-python,
plus its published vectors, the public URL behind a proxy, the port quirk and dedupe."""

import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime
from urllib.parse import parse_qsl, urlencode

import pytest
from twilio.request_validator import RequestValidator

from hooklatch import create_app
from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance

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


class TestTwilioConformance(HttpConformance):
    provider = "twilio"
    secret = "twilio-token-old"
    other_secret = "twilio-token-new"
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


class TestTwilioJsonConformance(HttpConformance):
    """Event Streams posts JSON: the URL carries bodySHA256, the signature covers the URL."""

    provider = "twilio"
    secret = "twilio-token-old"
    other_secret = "twilio-token-new"
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


# -- the SDK's published vectors, against the provider with fixed inputs ------------------

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


def verify(url, body, signature, *, secrets=("12345",), headers=None):
    provider = load_providers()["twilio"]
    delivery = Delivery("POST", url, {"x-twilio-signature": signature, **(headers or {})}, body)
    provider.verify(delivery, secrets=list(secrets), now=NOW)


@pytest.mark.parametrize(
    ("url", "body", "signature"),
    [
        pytest.param(SDK_URL, SDK_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", id="form"),
        pytest.param(
            SDK_URL,
            b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234",
            "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
            id="repeated-param",
        ),
        pytest.param(
            SDK_URL.replace(".com", ".com:1234"),
            SDK_PARAMS,
            "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
            id="signed-without-the-port-it-came-on",
        ),
        pytest.param(
            SDK_URL.replace(".com", ".com:1234").replace("https", "http"),
            SDK_PARAMS,
            "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=",
            id="http-signed-with-its-port",
        ),
        pytest.param(SDK_URL, SDK_PARAMS, "kvajT1Ptam85bY51eRf/AJRuM3w=", id="signed-with-:443"),
        pytest.param(
            SDK_URL.replace("https", "http"),
            SDK_PARAMS,
            "0ZXoZLH/DfblKGATFgpif+LLRf4=",
            id="signed-with-:80",
        ),
        pytest.param(
            f"{SDK_URL}&bodySHA256={SDK_BODY_HASH}",
            SDK_BODY,
            "a9nBmqA0ju/hNViExpshrM61xv4=",
            id="json-body",
        ),
    ],
)
def test_twilio_sdk_vectors_verify(url, body, signature):
    verify(url, body, signature)
    with pytest.raises(VerificationError) as refused:
        verify(url, body, signature, secrets=["54321"])
    assert refused.value.reason == "bad_signature"


def test_twilio_json_body_must_match_its_bodysha256():
    url = f"{SDK_URL}&bodySHA256={SDK_BODY_HASH}"
    with pytest.raises(VerificationError) as refused:
        verify(url, SDK_BODY.replace(b"true", b"false"), "a9nBmqA0ju/hNViExpshrM61xv4=")
    assert refused.value.reason == "bad_signature"


def test_twilio_shared_key_signatures_use_the_algorithm_twilio_names():
    signature = RequestValidator("12345").compute_signature(
        SDK_URL, dict(parse_qsl(SDK_PARAMS.decode())), "HMAC_SHA256"
    )
    settings = {"x-twilio-webhooks-signature-settings": "key=sk_1,algorithm=HMAC_SHA256"}
    verify(SDK_URL, SDK_PARAMS, signature, headers=settings)
    with pytest.raises(VerificationError) as refused:
        verify(SDK_URL, SDK_PARAMS, signature)  # read as SHA-1: no match
    assert refused.value.reason == "bad_signature"
    unknown = {"x-twilio-webhooks-signature-settings": "algorithm=HMAC_MD5"}
    with pytest.raises(VerificationError) as refused:
        verify(SDK_URL, SDK_PARAMS, signature, headers=unknown)
    assert refused.value.reason == "malformed_header"


# -- through the real endpoint ---------------------------------------------------------


@pytest.fixture
def proxied(settings, router):
    """hooklatch behind a proxy: Twilio calls https://hooks.example.com, the request
    reaches the app on an internal address."""
    app = create_app(replace(settings, public_url="https://hooks.example.com"), router=router)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


INTERNAL = "http://10.1.2.3:8000"


def test_twilio_signature_is_checked_against_the_public_url_behind_a_proxy(proxied):
    client, runtime = proxied
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    path = f"/hooks/{endpoint}?tenant=acme"
    body = message_callback()
    for public in (
        f"https://hooks.example.com{path}",
        f"https://hooks.example.com:443{path}",  # the port quirk: either is Twilio's
    ):
        headers = {
            "X-Twilio-Signature": form_signature(TOKEN, public, body),
            "Content-Type": "application/x-www-form-urlencoded",
        }
        response = client.post(path, data=body, headers=headers, base_url=INTERNAL)
        assert response.status_code == 200, response.json
    # Signed for the address the app sees itself: not what Twilio signed, so refused.
    headers["X-Twilio-Signature"] = form_signature(TOKEN, INTERNAL + path, body)
    response = client.post(path, data=body, headers=headers, base_url=INTERNAL)
    assert (response.status_code, response.json["error"]) == (401, "bad_signature")
    assert count(runtime, "SELECT count(*) FROM events") == 1


def post_form(client, runtime, endpoint, body, **headers):
    url = f"{runtime.settings.public_url}/hooks/{endpoint}"
    headers = {
        "X-Twilio-Signature": form_signature(TOKEN, url, body),
        "Content-Type": "application/x-www-form-urlencoded",
        **headers,
    }
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def stored(runtime):
    with runtime.engine.connect() as connection:
        rows = connection.exec_driver_sql("SELECT external_id, type FROM events ORDER BY id").all()
    return [tuple(row) for row in rows]


def test_twilio_retry_with_the_same_idempotency_token_is_a_duplicate(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    body = message_callback(status="sent")
    token = {"I-Twilio-Idempotency-Token": "9a1b2c3d-retry"}
    first = post_form(client, runtime, endpoint, body, **token)
    again = post_form(client, runtime, endpoint, body, **token)
    assert (first.json["status"], again.json["status"]) == ("accepted", "duplicate")
    assert stored(runtime) == [("9a1b2c3d-retry", "message.sent")]


def test_twilio_without_a_token_dedupes_on_the_resource_sid_and_status(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    sent, delivered = message_callback(status="sent"), message_callback(status="delivered")
    call = urlencode(
        {
            "AccountSid": "AC0",
            "CallSid": "CA0000000000000000000000000000000b",
            "CallStatus": "completed",
            "SequenceNumber": "3",
            "Timestamp": "Sat, 21 Nov 2026 12:00:00 +0000",
        }
    ).encode()
    answers = [post_form(client, runtime, endpoint, b).json["status"] for b in (sent, delivered)]
    answers += [post_form(client, runtime, endpoint, b).json["status"] for b in (delivered, call)]
    assert answers == ["accepted", "accepted", "duplicate", "accepted"]
    assert stored(runtime) == [
        ("SM0000000000000000000000000000000a:sent", "message.sent"),
        ("SM0000000000000000000000000000000a:delivered", "message.delivered"),
        ("CA0000000000000000000000000000000b:completed:3", "call.completed"),
    ]
    occurred = count(
        runtime,
        "SELECT extract(epoch FROM occurred_at)::bigint FROM events WHERE type = :t",
        t="call.completed",
    )
    assert occurred == int(NOW.timestamp())  # the callback's Timestamp


def test_twilio_request_with_nothing_to_dedupe_on_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    response = post_form(client, runtime, endpoint, b"AccountSid=AC0&Foo=bar")
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
    assert stored(runtime) == []


def test_twilio_event_streams_batch_stores_one_event_per_cloud_event(client, runtime):
    endpoint, _ = make_endpoint(runtime, "twilio", secrets=[TOKEN])
    events = [
        {
            "id": f"EZ{n}",
            "type": "com.twilio.messaging.message.sent",
            "time": "2026-11-21T12:00:00Z",
        }
        for n in range(3)
    ]
    body = json.dumps(events).encode()
    url = with_body_hash(f"{runtime.settings.public_url}/hooks/{endpoint}", body)
    headers = {
        "X-Twilio-Signature": RequestValidator(TOKEN).compute_signature(url, {}),
        "Content-Type": "application/json",
    }
    path = url.removeprefix(runtime.settings.public_url)
    assert client.post(path, data=body, headers=headers).json["status"] == "accepted"
    assert client.post(path, data=body, headers=headers).json["status"] == "duplicate"
    assert [row[0] for row in stored(runtime)] == ["EZ0", "EZ1", "EZ2"]
