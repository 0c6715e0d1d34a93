"""The conformance kit run through the real HTTP endpoint, checking that refusals store nothing
(tests/integration/providers/test_every_provider.py)."""

import uuid
from typing import Any
from urllib.parse import urlsplit

from hooklatch.testing import Outcome, ProviderConformance
from tests.support.database import count
from tests.support.pipeline import make_endpoint


class HttpConformance(ProviderConformance):
    """Mixed in after a provider's case class: ``endpoint`` creates a real endpoint, and
    ``deliver`` posts through the Flask test client and keeps the response."""

    client: Any  # set by whoever makes the case, with the runtime
    runtime: Any
    endpoint_id: str
    response: Any

    def endpoint(self, secrets):
        self.endpoint_id, _ = make_endpoint(
            self.runtime,
            self.plugin().name,
            name=f"conformance-{uuid.uuid4().hex[:8]}",
            secrets=list(secrets),
            options=dict(self.options),
        )
        return f"{self.runtime.settings.public_url}/hooks/{self.endpoint_id}"

    def deliver(self, url, body, headers):
        parts = urlsplit(url)
        before = self.stored()
        response = self.response = self.client.post(
            parts.path + (f"?{parts.query}" if parts.query else ""), data=body, headers=headers
        )
        if response.status_code == 200:
            events = response.json["events"]
            return Outcome(True, None, tuple(e["external_id"] for e in events))
        assert response.status_code < 500, response.data
        assert self.stored() == before, "a refused request stored something"
        return Outcome(False, response.json["error"])

    def stored(self):
        return count(
            self.runtime,
            "SELECT count(*) FROM events WHERE endpoint_id = :e",
            e=self.endpoint_id,
        )
