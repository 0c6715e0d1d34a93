"""Slack's conformance cases, run against the provider itself."""

from tests.support.providers.slack import SlackCase


class TestSlackConformance(SlackCase):
    pass
