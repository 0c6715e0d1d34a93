"""`hooklatch send-test`'s request, the provider's sample event signed by its own
``sign``, is accepted through the real HTTP endpoint."""

from datetime import UTC, datetime

import pytest

from hooklatch.providers.base import Delivery
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers import shopify, slack, zoom


@pytest.mark.parametrize(
    ("provider", "secret"),
    [("shopify", shopify.SECRET), ("slack", slack.SECRET), ("zoom", zoom.SECRET)],
)
def test_the_sample_event_signed_by_the_provider_is_accepted(client, runtime, provider, secret):
    endpoint, _ = make_endpoint(runtime, provider, secrets=[secret])
    plugin, now = runtime.provider(provider), datetime.now(UTC)
    headers, body = plugin.sample_event(now=now)
    headers.update(plugin.sign(Delivery("POST", "", {}, body), secret=secret, now=now))
    response = post_json(client, endpoint, body, headers)
    assert response.status_code == 200, response.json
    assert response.json["status"] == "accepted"
