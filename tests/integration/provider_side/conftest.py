"""Stripe's and GitHub's local API servers, and the app served where they deliver."""

import pytest

from tests.support.fake_github import FakeGitHub
from tests.support.fake_stripe import ENDPOINTS_WRITE, EVENTS_READ, FakeStripe
from tests.support.live_app import served
from tests.support.provider_apis import GITHUB_TOKEN, STRIPE_KEY, Cli, credential_file


@pytest.fixture
def live(app):
    """The app's base URL, where the providers deliver."""
    with served(app) as url:
        yield url


@pytest.fixture
def cli(settings, live):
    return Cli(settings, live)


@pytest.fixture
def stripe_api():
    with FakeStripe() as fake:
        fake.add_key(STRIPE_KEY, permissions=[EVENTS_READ, ENDPOINTS_WRITE])
        yield fake


@pytest.fixture
def github_api():
    with FakeGitHub() as fake:
        fake.add_token(GITHUB_TOKEN)
        yield fake


@pytest.fixture
def stripe_key(tmp_path):
    """A credential file holding the Stripe key."""
    return credential_file(tmp_path, f"# a restricted key\napi_key={STRIPE_KEY}\n")
