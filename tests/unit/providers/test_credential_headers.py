"""Which built-in providers send a credential rather than a signature."""

import pytest

from hooklatch.providers.loading import load_providers

PROVIDERS = {
    name: provider
    for name, provider in load_providers().items()
    if type(provider).__module__.startswith("hooklatch.providers.")
}


@pytest.mark.parametrize("mode", ["token", "signing"])
def test_gitlab_declares_its_secret_token_in_both_modes(mode):
    """A hook may have a secret token besides a signing token: GitLab then sends both."""
    gitlab = PROVIDERS["gitlab"]
    assert gitlab.credential_headers_for({"mode": mode}) == {"x-gitlab-token"}


@pytest.mark.parametrize("name", sorted(set(PROVIDERS) - {"gitlab"}))
def test_the_other_built_in_providers_send_signatures_only(name):
    options = {"header": "X-Token", "id_header": "X-Id"} if name == "generic-hmac" else {}
    assert PROVIDERS[name].credential_headers_for(options) == frozenset()
