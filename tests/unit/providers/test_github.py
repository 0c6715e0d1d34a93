"""GitHub's conformance cases, run against the provider itself."""

from tests.support.providers.github import GitHubCase


class TestGitHubConformance(GitHubCase):
    pass
