"""Discord's conformance cases and its sample event, run against the provider itself."""

from datetime import UTC, datetime

import pytest

from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.discord import APP_KEY, DiscordCase


class TestDiscordConformance(DiscordCase):
    pass


def test_the_sample_event_parses_but_a_public_key_cannot_sign_it():
    provider, now = load_providers()["discord"], datetime.now(UTC)
    headers, body = provider.sample_event(now=now)
    delivery = Delivery("POST", "", {k.lower(): v for k, v in headers.items()}, body)
    (event,) = provider.parse(delivery)
    assert event.type == "application_command"
    assert event.occurred_at is not None
    assert abs((event.occurred_at - now).total_seconds()) < 1
    with pytest.raises(ValueError, match="developer portal"):
        provider.sign(delivery, secret=APP_KEY, now=now)
