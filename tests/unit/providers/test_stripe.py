"""Stripe's conformance cases, run against the provider itself."""

from tests.support.providers.stripe import StripeCase


class TestStripeConformance(StripeCase):
    pass
