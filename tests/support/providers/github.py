"""How GitHub signs a test request (githubkit), for the conformance kit."""

import json

from githubkit.webhooks import sign as github_sign

from hooklatch.testing import ProviderConformance


class GitHubCase(ProviderConformance):
    provider = "github"
    secret, other_secret = "gh-conformance-old", "gh-conformance-new"
    signature_headers = ("X-Hub-Signature-256",)
    form_encoded = True
    delivery_id = "no-event-body"  # set by event_body: GitHub sends the id in a header

    def sign(self, body, *, secret, now, url):
        return {
            "X-Hub-Signature-256": github_sign(secret, body, method="sha256"),
            "X-GitHub-Event": "issues",
            "X-GitHub-Delivery": self.delivery_id,
        }

    def event_body(self, event_id, *, note="hello"):
        self.delivery_id = event_id
        payload = {"action": "opened", "issue": {"number": 1, "title": note}}
        return json.dumps(payload, ensure_ascii=False).encode()

    def form_event_body(self, event_id):
        from urllib.parse import urlencode

        self.delivery_id = event_id
        return urlencode({"payload": json.dumps({"action": "opened"})}).encode()
