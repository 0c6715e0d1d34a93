"""The conformance kit run through the real HTTP endpoint, checking that refusals store nothing."""

import uuid
from urllib.parse import urlsplit

import pytest

from hooklatch.testing import Outcome, ProviderConformance
from tests.conftest import count, make_endpoint


class HttpConformance(ProviderConformance):
    @pytest.fixture(autouse=True)
    def _through_http(self, client, runtime):
        self.client, self.runtime = client, runtime

    def endpoint(self, secrets):
        self.endpoint_id, _ = make_endpoint(
            self.runtime,
            self.provider,
            name=f"conformance-{uuid.uuid4().hex[:8]}",
            secrets=list(secrets),
            options=dict(self.options),
        )
        return f"{self.runtime.settings.public_url}/hooks/{self.endpoint_id}"

    def deliver(self, url, body, headers):
        parts = urlsplit(url)
        before = self.stored()
        response = self.client.post(
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
