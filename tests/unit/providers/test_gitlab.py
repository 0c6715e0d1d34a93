"""GitLab's conformance cases in both modes, run against the provider itself."""

from tests.support.providers.gitlab import GitLabSigningCase, GitLabTokenCase


class TestGitLabSigningConformance(GitLabSigningCase):
    pass


class TestGitLabTokenConformance(GitLabTokenCase):
    pass
