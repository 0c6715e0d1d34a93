"""GitLab's conformance cases in both modes, run against the provider itself."""

from tests.support.providers.gitlab import GitLabSigningCase, GitLabTokenCase


class TestGitLabSigningConformance(GitLabSigningCase):
    pass


class TestGitLabTokenConformance(GitLabTokenCase):
    pass


def test_in_signing_mode_the_dedupe_key_is_the_signed_webhook_id_not_idempotency_key():
    """Idempotency-Key is not signed: a captured signed request sent again within the
    tolerance under a new Idempotency-Key must still be the same event."""
    from datetime import UTC, datetime

    from hooklatch.providers.base import Delivery
    from hooklatch.providers.gitlab import GitLabProvider
    from tests.support.signing import standard_webhooks_v1, whsec

    secret, now = whsec("gitlab-signing"), datetime.now(UTC)
    body = b'{"object_kind": "push"}'
    headers = {
        "idempotency-key": "attacker-chosen",
        "webhook-id": "msg_signed",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": standard_webhooks_v1(secret, "msg_signed", now, body),
        "x-gitlab-event": "Push Hook",
    }
    delivery = Delivery("POST", "https://h/hooks/ep", headers, body, {"mode": "signing"})
    provider = GitLabProvider()
    provider.verify(delivery, secrets=[secret], now=now)
    [event] = provider.parse(delivery)
    assert event.external_id == "msg_signed"


def test_in_token_mode_idempotency_key_is_the_dedupe_key():
    from hooklatch.providers.base import Delivery
    from hooklatch.providers.gitlab import GitLabProvider

    headers = {"idempotency-key": "key-1", "x-gitlab-event-uuid": "uuid-1"}
    delivery = Delivery("POST", "https://h/hooks/ep", headers, b'{"object_kind": "push"}', {})
    [event] = GitLabProvider().parse(delivery)
    assert event.external_id == "key-1"
