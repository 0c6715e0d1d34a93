"""One pass of every built-in provider through the real HTTP endpoint.

The conformance cases run against each provider itself in tests/unit/providers/; what
they cannot show is what the view adds whatever the provider: a signed request is
stored under the ids the provider gives, a repeat is answered as a duplicate and stored
once, and a refused request stores nothing and says why.
"""

import pytest

from hooklatch.testing import CHECKS as KIT
from tests.support.conformance import HttpConformance
from tests.support.database import count
from tests.support.providers.discord import DiscordCase
from tests.support.providers.generic_hmac import GenericHmacTimestampCase, GenericHmacUrlCase
from tests.support.providers.github import GitHubCase
from tests.support.providers.gitlab import GitLabSigningCase, GitLabTokenCase
from tests.support.providers.linear import LinearCase
from tests.support.providers.meta import MetaCase
from tests.support.providers.paddle import PaddleCase
from tests.support.providers.sendgrid import SendGridCase
from tests.support.providers.shopify import ShopifyCase
from tests.support.providers.slack import SlackCase
from tests.support.providers.square import SquareCase
from tests.support.providers.standard_webhooks import (
    StandardWebhooksCase,
    StandardWebhooksEd25519Case,
)
from tests.support.providers.stripe import StripeCase
from tests.support.providers.twilio import TwilioCase, TwilioJsonCase
from tests.support.providers.zoom import ZoomCase

CASES = [
    DiscordCase,
    GenericHmacTimestampCase,
    GenericHmacUrlCase,
    GitHubCase,
    GitLabSigningCase,
    GitLabTokenCase,
    LinearCase,
    MetaCase,
    PaddleCase,
    SendGridCase,
    ShopifyCase,
    SlackCase,
    SquareCase,
    StandardWebhooksCase,
    StandardWebhooksEd25519Case,
    StripeCase,
    TwilioCase,
    TwilioJsonCase,
    ZoomCase,
]

CHECKS = [
    check
    for check in KIT
    if check.name
    in (
        "valid_request_is_accepted",
        "tampered_body_is_refused",
        "wrong_secret_is_refused",
        "missing_signature_header_is_refused",
    )
]


def over_http(case_class, client, runtime):
    """The provider's case, with requests going through the endpoint (its own ``deliver``,
    where it has one, still chooses the URL)."""
    case = type(f"Http{case_class.__name__}", (case_class, HttpConformance), {})()
    case.client, case.runtime = client, runtime
    return case


def case_id(case_class):
    return case_class.__name__.removesuffix("Case")


# A scheme without the feature a check tests leaves that check out (a GitLab secret
# token signs no body, so a tampered body cannot be told apart).
RUNS = [
    pytest.param(case_class, check, id=f"{case_id(case_class)}-{check.name}")
    for case_class in CASES
    for check in CHECKS
    if check.applies_to(case_class)
]


@pytest.mark.parametrize(("case_class", "check"), RUNS)
def test_every_provider_through_the_endpoint(case_class, check, client, runtime):
    check.run(over_http(case_class, client, runtime))


@pytest.mark.parametrize("case_class", CASES, ids=case_id)
def test_a_repeated_delivery_is_a_duplicate_stored_once(case_class, client, runtime):
    case = over_http(case_class, client, runtime)
    body = case.event_body("evt_http_repeat")
    url = case.endpoint([case.secret])
    headers = case.headers(body, secret=case.secret, url=url)
    statuses = []
    for _ in range(2):
        assert case.deliver(url, body, headers).accepted
        statuses.append(case.response.json["status"])
    assert statuses == ["accepted", "duplicate"]
    assert case.stored() == len(case.expected_ids("evt_http_repeat"))
    assert count(runtime, "SELECT count(*) FROM outbox") == case.stored()
