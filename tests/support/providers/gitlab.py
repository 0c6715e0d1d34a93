"""How GitLab signs a test request in both modes, for the conformance kit and the tests:
signing tokens signed by the standardwebhooks package, secret tokens sent as GitLab sends
them."""

import json

from hooklatch.testing import ProviderConformance
from tests.support.providers import SignsWithEachSecret
from tests.support.signing import standard_webhooks_v1 as sdk_v1
from tests.support.signing import whsec


def push_body():
    return json.dumps({"object_kind": "push", "ref": "refs/heads/main"}).encode()


class GitLabCase(ProviderConformance):
    provider = "gitlab"
    delivery_id = "no-event-body"  # set by event_body: GitLab sends the id in a header

    def gitlab_headers(self):
        return {"X-Gitlab-Event": "Issue Hook", "Idempotency-Key": self.delivery_id}

    def event_body(self, event_id, *, note="hello"):
        self.delivery_id = event_id
        payload = {
            "object_kind": "issue",
            "event_type": "issue",
            "object_attributes": {"iid": 1, "title": note, "action": "open"},
        }
        return json.dumps(payload, ensure_ascii=False).encode()


class GitLabSigningCase(SignsWithEachSecret, GitLabCase):
    secret, other_secret = whsec("gitlab-signing-old"), whsec("gitlab-signing-new")
    options = {"mode": "signing"}
    signature_headers = ("webhook-signature",)
    signs_timestamp = True

    def sign_several(self, body, *, secrets, now, url):
        # GitLab sends webhook-id equal to Idempotency-Key.
        entries = [sdk_v1(secret, self.delivery_id, now, body) for secret in secrets]
        return {
            **self.gitlab_headers(),
            "webhook-id": self.delivery_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": " ".join(entries),
        }


class GitLabTokenCase(GitLabCase):
    secret, other_secret = "gitlab-token-old", "gitlab-token-new"
    signature_headers = ("X-Gitlab-Token",)
    # A secret token signs nothing: a changed body cannot be noticed (see the test below),
    # so the kit leaves its tampered-body check out.
    signs_body = False

    def sign(self, body, *, secret, now, url):
        return {**self.gitlab_headers(), "X-Gitlab-Token": secret}

    def test_token_mode_cannot_notice_a_tampered_body(self):
        body = self.event_body("evt_conf_tampered")
        url = self.endpoint([self.secret])
        headers = self.headers(body, secret=self.secret, url=url)
        assert self.deliver(url, body.replace(b"hello", b"hellp"), headers).accepted
