"""`hooklatch send-test` sends a provider's sample event signed by the provider's own
``sign``: for each provider added here, that request verifies and parses."""

from datetime import UTC, datetime

import pytest

from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.signing import whsec


@pytest.mark.parametrize(
    ("provider", "secret", "options"),
    [
        ("standard-webhooks", whsec("sample"), {}),
        ("gitlab", "gitlab-token", {"mode": "token"}),
        ("gitlab", whsec("sample"), {"mode": "signing"}),
        ("linear", "lin_wh_sample", {}),
        ("paddle", "pdl_ntfset_01sample_secret", {}),
    ],
)
def test_a_signed_sample_event_verifies_and_parses(provider, secret, options):
    plugin, now = load_providers()[provider], datetime.now(UTC)
    headers, body = plugin.sample_event(now=now)
    unsigned = Delivery("POST", "u", {k.lower(): v for k, v in headers.items()}, body, options)
    headers.update(plugin.sign(unsigned, secret=secret, now=now))
    delivery = Delivery("POST", "u", {k.lower(): v for k, v in headers.items()}, body, options)
    plugin.verify(delivery, secrets=[secret], now=now)
    [event] = plugin.parse(delivery)
    assert event.external_id and event.type


def test_a_standard_webhooks_endpoint_with_a_public_key_cannot_sign_a_sample():
    plugin, now = load_providers()["standard-webhooks"], datetime.now(UTC)
    _, body = plugin.sample_event(now=now)
    with pytest.raises(ValueError, match="private key"):
        plugin.sign(Delivery("POST", "u", {}, body), secret="whpk_" + "A" * 43, now=now)
