"""The admin token the tests' settings carry (long and random enough for the settings'
strength check), the header that presents it to the admin API and /metrics, and the token
FakeGitHub takes in the ``github`` fixture."""

from __future__ import annotations

ADMIN_TOKEN = "test-admin-token-4b7e1c9a2f6d8035e1a7c4b9"
AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# Another token strong enough to start with: /metrics' read-only one.
METRICS_TOKEN = "test-metrics-token-9d2f6a1c7e4b8053a6c1f7e2"
# The GitHub token the ``github`` fixture's FakeGitHub takes.
GITHUB_TOKEN = "ghp_test_token_for_fake_github_0123456789"
