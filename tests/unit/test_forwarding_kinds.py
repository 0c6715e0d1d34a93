"""Each kind of destination checks its settings, parts them into shown settings and
secrets, and shows its URL without a password, a token or a query; no refusal quotes a
secret."""

from __future__ import annotations

import socket
import ssl

import pytest

from hooklatch.forwarding.kinds import KINDS, kind
from hooklatch.forwarding.kinds.base import Connection
from hooklatch.forwarding.kinds.failures import os_reason
from hooklatch.forwarding.kinds.redis_streams import entry
from tests.support.forwarding import message
from tests.support.signing import whsec

SECRET = "hunter2-secret"
SIGNING = whsec("forwarding")

# Settings each kind accepts, with SECRET wherever a secret can hold it.
VALID = {
    "http": {
        "url": f"https://user:{SECRET}@hooks.example.test:8443/in?token={SECRET}",
        "signing_secret": SIGNING,
    },
    "nats": {"url": f"nats://{SECRET}@nats.example.test:4222", "subject": "hooks.stripe"},
    "rabbitmq": {"url": f"amqps://app:{SECRET}@mq.example.test/prod", "routing_key": "hooks"},
    "redis": {
        "url": f"rediss://:{SECRET}@cache.example.test:6380/2?password={SECRET}",
        "stream": "hooks",
    },
}
SHOWN = {
    "http": "https://hooks.example.test:8443/in",
    "nats": "nats://nats.example.test:4222",
    "rabbitmq": "amqps://mq.example.test/prod",
    "redis": "rediss://cache.example.test:6380/2",
}


def check(name: str, **changes: str | None) -> Connection:
    given = {**VALID[name], **changes}
    return kind(name).check({k: v for k, v in given.items() if v is not None})


def refusal(name: str, **changes: str | None) -> str:
    with pytest.raises(ValueError) as refused:
        check(name, **changes)
    assert SECRET not in str(refused.value)
    return str(refused.value)


def test_the_kinds_are_known_by_their_names():
    assert sorted(KINDS) == ["http", "nats", "rabbitmq", "redis"]
    assert all(KINDS[name].name == name for name in KINDS)
    with pytest.raises(ValueError, match="there are http, nats, rabbitmq, redis"):
        kind("kafka")


@pytest.mark.parametrize("name", sorted(VALID))
def test_the_url_is_a_secret_shown_without_its_password_token_or_query(name):
    connection = check(name)
    assert connection.shown == SHOWN[name]
    assert connection.secrets["url"] == VALID[name]["url"]
    assert SECRET not in repr(connection.settings)
    assert all(kind(name).fields[field].secret for field in connection.secrets)


@pytest.mark.parametrize("name", sorted(VALID))
def test_an_unknown_setting_is_refused_by_name(name):
    assert "takes no setting password" in refusal(name, password=SECRET)


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_missing_or_empty_url_is_refused(name):
    assert refusal(name, url=None).endswith("needs url")
    assert refusal(name, url=" ").endswith("needs url")


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_url_of_another_scheme_or_a_broken_one_is_refused_without_quoting_it(name):
    assert "should start with" in refusal(name, url=f"ftp://u:{SECRET}@host/")
    assert "names no host" in refusal(name, url=f"{VALID[name]['url'].split(':')[0]}:///x")
    assert "not a valid URL" in refusal(name, url=f"http://u:{SECRET}@host:{SECRET}/")
    assert "not a valid URL" in refusal(name, url=f"http://[{SECRET}/")


def test_http_keeps_both_its_settings_secret():
    connection = check("http")
    assert connection.settings == {}
    assert connection.secrets == VALID["http"]


@pytest.mark.parametrize(
    "signing_secret", [SECRET, f"whsec_{SECRET}!", "whsec_", SIGNING.removeprefix("whsec_")]
)
def test_http_refuses_a_signing_secret_that_is_not_whsec_and_base64(signing_secret):
    assert "signing_secret should be whsec_" in refusal("http", signing_secret=signing_secret)


def test_http_needs_a_signing_secret():
    assert refusal("http", signing_secret=None).endswith("needs signing_secret")


@pytest.mark.parametrize("subject", ["hooks.*", "hooks.>", ">", "hooks stripe", "hooks..x", ".x"])
def test_nats_refuses_a_subject_with_a_wildcard_a_space_or_an_empty_token(subject):
    assert "subject should be" in refusal("nats", subject=subject)


def test_nats_takes_an_optional_stream_left_out_when_empty():
    assert check("nats").settings == {"subject": "hooks.stripe"}
    assert check("nats", stream="").settings == {"subject": "hooks.stripe"}
    assert check("nats", stream="HOOKS").settings == {"subject": "hooks.stripe", "stream": "HOOKS"}
    assert "stream should be" in refusal("nats", stream="hooks.stripe")


def test_rabbitmq_publishes_to_the_default_exchange_unless_told_otherwise():
    assert check("rabbitmq").settings == {"exchange": "", "routing_key": "hooks"}
    assert check("rabbitmq", exchange="events").settings["exchange"] == "events"
    assert refusal("rabbitmq", routing_key=None).endswith("needs routing_key")
    assert "at most 255 bytes" in refusal("rabbitmq", routing_key="k" * 256)


def test_rabbitmq_refuses_a_query_option_pika_does_not_take_without_quoting_it():
    url = f"amqp://app:{SECRET}@mq.example.test/?{SECRET}=1"
    assert "not a valid AMQP one" in refusal("rabbitmq", url=url)


@pytest.mark.parametrize("maxlen", ["0", "-5", "ten", "1.5"])
def test_redis_refuses_a_maxlen_that_is_not_a_positive_whole_number(maxlen):
    assert "maxlen should be" in refusal("redis", maxlen=maxlen)


def test_redis_takes_a_maxlen():
    assert check("redis", maxlen="1000").settings == {"stream": "hooks", "maxlen": "1000"}


def test_a_redis_entry_holds_the_events_identity_and_its_body():
    sent = message(3, ordering_key="cus_1", body=b"\x00raw")
    assert entry(sent) == {
        "key": sent.key,
        "event_id": sent.event_id,
        "type": "invoice.paid",
        "provider": "stripe",
        "endpoint": "ep_billing",
        "received_at": "2026-03-01T12:00:03+00:00",
        "ordering_key": "cus_1",
        "content_type": "application/json",
        "body": b"\x00raw",
    }
    assert "ordering_key" not in entry(message())


def test_a_failures_reason_is_the_system_error_under_the_clients_wrapping():
    refused = ConnectionRefusedError(111, "Connection refused")
    wrapped = RuntimeError(f"cannot reach https://u:{SECRET}@host/", ValueError(refused))
    assert os_reason(wrapped) == "connection refused"
    try:
        try:
            raise refused
        except OSError:
            raise RuntimeError(SECRET) from None
    except RuntimeError as implicit:
        assert os_reason(implicit) == "connection refused"  # through __context__
    assert os_reason(RuntimeError(SECRET)) is None


def test_a_failures_reason_is_the_system_text_for_its_errno_not_the_clients():
    asyncio_refused = ConnectionRefusedError(111, "Connect call failed ('10.0.0.1', 4222)")
    assert os_reason(asyncio_refused) == "connection refused"
    assert os_reason(socket.gaierror(-2, "Name or service not known")) == (
        "name or service not known"
    )
    untrusted = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed")
    assert os_reason(untrusted) == "[SSL: CERTIFICATE_VERIFY_FAILED] self-signed"


def test_a_token_in_an_http_urls_path_is_not_shown():
    """A Slack or Discord webhook URL carries its token in the path."""
    slack = "https://hooks.slack.example/services/T000/B000/" + SECRET
    connection = check("http", url=slack)
    assert connection.shown == "https://hooks.slack.example/services/…"
    assert SECRET not in connection.shown
