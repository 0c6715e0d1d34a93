"""Shopify's conformance cases, run against the provider itself."""

from tests.support.providers.shopify import ShopifyCase


class TestShopifyConformance(ShopifyCase):
    pass
