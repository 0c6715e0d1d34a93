"""Linear's conformance cases, run against the provider itself."""

from tests.support.providers.linear import LinearCase


class TestLinearConformance(LinearCase):
    pass
