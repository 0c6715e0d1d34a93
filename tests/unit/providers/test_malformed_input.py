"""What a sender can put in a header or a body never makes a provider raise anything but
its typed refusals: timestamps are ASCII digits, times out of range are dropped, and JSON
nested too deeply is malformed_body."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import Delivery, check_timestamp
from hooklatch.providers.loading import load_providers
from tests.support.providers.generic_hmac import STRIPE_LIKE
from tests.support.providers.linear import linear_signature

PROVIDERS = load_providers()
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
NOT_ASCII_DIGITS = [
    "²",
    "¹⁷⁰⁰⁰⁰⁰⁰⁰⁰",
    "\u0661\u0667" + "\u0660" * 8,
    "+1700000000",
    "-1700000000",
    "1_700_000_000",
    "1700000000.5",
    "9" * 400,
]
JSON = {"content-type": "application/json"}
LATE_OFFSET = "9999-12-31T23:59:59-05:00"  # in range here, past year 9999 in UTC


def delivery(headers=None, body=b"{}", options=None, url="https://hooks.example.test/h"):
    lowered = {name.lower(): value for name, value in (headers or JSON).items()}
    return Delivery("POST", url, lowered, body, options or {})


def timestamp_cases(stamp):
    """(provider, headers, body, options) whose only fault is the timestamp ``stamp``."""
    hex64, b64 = "0" * 64, "AAAA"
    unsigned = b'{"type": "Issue"}'
    return [
        ("stripe", {"Stripe-Signature": f"t={stamp},v1={hex64}"}, b"{}", {}),
        ("paddle", {"Paddle-Signature": f"ts={stamp};h1={hex64}"}, b"{}", {}),
        (
            "slack",
            {"X-Slack-Signature": "v0=" + hex64, "X-Slack-Request-Timestamp": stamp},
            b"",
            {},
        ),
        ("zoom", {"x-zm-signature": "v0=" + hex64, "x-zm-request-timestamp": stamp}, b"", {}),
        (
            "discord",
            {"X-Signature-Ed25519": "0" * 128, "X-Signature-Timestamp": stamp},
            b"{}",
            {},
        ),
        (
            "sendgrid",
            {
                "X-Twilio-Email-Event-Webhook-Signature": b64,
                "X-Twilio-Email-Event-Webhook-Timestamp": stamp,
            },
            b"[]",
            {},
        ),
        (
            "standard-webhooks",
            {"webhook-id": "m", "webhook-timestamp": stamp, "webhook-signature": "v1," + b64},
            b"{}",
            {},
        ),
        (
            "gitlab",
            {"webhook-id": "m", "webhook-timestamp": stamp, "webhook-signature": "v1," + b64},
            b"{}",
            {"mode": "signing"},
        ),
        (
            "linear",
            {"Linear-Signature": linear_signature("lin", unsigned), "Linear-Timestamp": stamp},
            unsigned,
            {},
        ),
        (
            "generic-hmac",
            {"X-Acme-Signature": "sha256=" + hex64, "X-Acme-Timestamp": stamp},
            b"{}",
            STRIPE_LIKE,
        ),
    ]


@pytest.mark.parametrize("stamp", NOT_ASCII_DIGITS)
def test_a_timestamp_header_that_is_not_a_few_ascii_digits_is_malformed(stamp):
    for name, headers, body, options in timestamp_cases(stamp):
        with pytest.raises(MalformedRequest) as caught:
            PROVIDERS[name].verify(
                delivery(headers, body, options), secrets=["lin", "whsec_AAAA"], now=NOW
            )
        assert caught.value.reason == "malformed_header", name


@pytest.mark.parametrize("stamp", ["1e400", "-1e400", "NaN", "9" * 400, "true", '"1700000000000"'])
def test_a_signed_linear_body_time_out_of_range_is_malformed_not_a_crash(stamp):
    body = b'{"type": "Issue", "webhookTimestamp": %s}' % stamp.encode()
    headers = {"Linear-Signature": linear_signature("lin", body)}
    with pytest.raises(MalformedRequest) as caught:
        PROVIDERS["linear"].verify(delivery(headers, body), secrets=["lin"], now=NOW)
    assert caught.value.reason == "malformed_body"


@pytest.mark.parametrize("stamp", [10**400, -(10**400), 10**20])
def test_a_timestamp_beyond_any_clock_is_refused_as_off_the_clock(stamp):
    with pytest.raises(VerificationError) as caught:
        check_timestamp(stamp, now=NOW, tolerance=timedelta(minutes=5))
    assert caught.value.reason in ("stale_timestamp", "future_timestamp")


def json_body(value):
    return json.dumps(value).encode()


TIME_CASES = [
    ("stripe", {}, json_body({"id": "evt_1", "type": "x", "created": 10**20}), {}),
    ("stripe", {}, b'{"id": "evt_1", "type": "x", "created": 1e400}', {}),
    ("stripe", {}, json_body({"id": "evt_1", "type": "x", "created": True}), {}),
    (
        "slack",
        JSON,
        json_body(
            {
                "type": "event_callback",
                "event_id": "Ev1",
                "event": {"type": "m"},
                "event_time": -(10**20),
            }
        ),
        {},
    ),
    (
        "slack",
        JSON,
        json_body({"type": "app_rate_limited", "api_app_id": "A1", "minute_rate_limited": 10**20}),
        {},
    ),
    ("sendgrid", {}, json_body([{"event": "open", "sg_event_id": "s1", "timestamp": 10**20}]), {}),
    ("meta", {}, b'{"object": "page", "entry": [{"id": "1", "time": 1e400}]}', {}),
    ("meta", {}, json_body({"object": "page", "entry": [{"id": "1", "time": "9" * 30}]}), {}),
    ("zoom", {}, json_body({"event": "meeting.started", "event_ts": 10**30}), {}),
    ("discord", {}, json_body({"id": "9" * 40, "type": 2}), {}),
    (
        "discord",
        {},
        json_body({"application_id": "1", "event": {"type": "E", "timestamp": LATE_OFFSET}}),
        {},
    ),
    (
        "linear",
        {},
        json_body(
            {"type": "Issue", "action": "create", "webhookId": "w", "createdAt": LATE_OFFSET}
        ),
        {},
    ),
    ("paddle", {}, json_body({"event_id": "e", "event_type": "t", "occurred_at": LATE_OFFSET}), {}),
    ("square", {}, json_body({"event_id": "e", "type": "t", "created_at": LATE_OFFSET}), {}),
    (
        "shopify",
        {"X-Shopify-Topic": "t", "X-Shopify-Event-Id": "e", "X-Shopify-Triggered-At": LATE_OFFSET},
        b"{}",
        {},
    ),
    (
        "twilio",
        {"content-type": "application/x-www-form-urlencoded"},
        b"MessageSid=SM1&MessageStatus=sent&Timestamp=Fri%2C+31+Dec+9999+23%3A59%3A59+-0500",
        {},
    ),
    (
        "standard-webhooks",
        {"webhook-id": "m", "webhook-signature": "v1,x"},
        json_body({"timestamp": LATE_OFFSET}),
        {},
    ),
    (
        "generic-hmac",
        {"X-Acme-Timestamp": "9" * 30, "X-Acme-Delivery": "d"},
        json_body({"type": "t"}),
        STRIPE_LIKE,
    ),
]


@pytest.mark.parametrize(("name", "headers", "body", "options"), TIME_CASES)
def test_a_time_out_of_range_is_dropped_and_the_event_kept(name, headers, body, options):
    """The event verified: its time is only what the sender says it was, so a time that
    cannot be represented is not kept rather than costing the event."""
    events = PROVIDERS[name].parse(delivery(headers or JSON, body, options))
    assert events and all(event.occurred_at is None for event in events)


DEEP = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECT = b'{"a": ' * 100_000 + b"1" + b"}" * 100_000
PARSE_CASES = [
    ("stripe", {}, {}),
    ("github", {"X-GitHub-Delivery": "d", "X-GitHub-Event": "push"}, {}),
    ("slack", JSON, {}),
    ("zoom", {}, {}),
    ("discord", {}, {}),
    ("shopify", {"X-Shopify-Topic": "t", "X-Shopify-Event-Id": "e"}, {}),
    ("standard-webhooks", {"webhook-id": "m", "webhook-signature": "v1,x"}, {}),
    ("gitlab", {"Idempotency-Key": "k", "X-Gitlab-Event": "Push Hook"}, {}),
    ("linear", {}, {}),
    ("paddle", {}, {}),
    ("square", {}, {}),
    ("sendgrid", {}, {}),
    ("meta", {}, {}),
    ("generic-hmac", {"X-Acme-Delivery": "d", "X-Acme-Timestamp": "1700000000"}, STRIPE_LIKE),
]


@pytest.mark.parametrize(("name", "headers", "options"), PARSE_CASES)
@pytest.mark.parametrize("body", [DEEP, DEEP_OBJECT, b'{"id": ' + DEEP + b"}"])
def test_json_nested_too_deeply_to_parse_is_malformed_body(name, headers, options, body):
    provider = PROVIDERS[name]
    request = delivery(headers or JSON, body, options)
    try:
        assert provider.handshake(request, secrets=["s"]) is None
    except MalformedRequest as exc:
        assert exc.reason == "malformed_body"
    with pytest.raises(MalformedRequest) as caught:
        provider.parse(request)
    assert caught.value.reason == "malformed_body"
    assert provider.payload(request.headers, body) is None


def test_twilio_json_nested_too_deeply_is_malformed_body():
    request = delivery(JSON, DEEP, url="https://hooks.example.test/h?bodySHA256=00")
    with pytest.raises(MalformedRequest):
        PROVIDERS["twilio"].parse(request)
    assert PROVIDERS["twilio"].payload(request.headers, DEEP) is None


def deepest_parseable():
    depth = 10
    while True:
        try:
            json.loads(b"[" * (depth + 1) + b"]" * (depth + 1))
        except RecursionError:
            return depth
        depth += 1


@pytest.mark.parametrize("name", ["meta", "sendgrid"])
def test_json_just_shallow_enough_to_parse_is_never_a_crash_when_digested(name):
    """Items without an id are keyed on a digest of their JSON, which recurses again."""
    limit = deepest_parseable()
    for depth in range(limit - 60, limit + 2):
        nested = b"[" * depth + b"]" * depth
        if name == "meta":
            body = b'{"object": "page", "entry": [{"id": "1", "x": ' + nested + b"}]}"
        else:
            body = b'[{"event": "open", "x": ' + nested + b"}]"
        try:
            PROVIDERS[name].parse(delivery(JSON, body))
        except MalformedRequest as exc:
            assert exc.reason == "malformed_body"


@pytest.mark.parametrize("tolerance", ["²", "0", "9" * 30, "+300"])
def test_a_generic_hmac_tolerance_past_a_year_or_not_ascii_digits_is_refused(tolerance):
    """Refused when the endpoint is created: at delivery it would overflow a timedelta."""
    with pytest.raises(ValueError, match="tolerance_seconds"):
        PROVIDERS["generic-hmac"].check_options({**STRIPE_LIKE, "tolerance_seconds": tolerance})
