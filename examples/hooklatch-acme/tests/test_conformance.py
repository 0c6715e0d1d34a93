"""The plugin's own tests: hooklatch's conformance kit, run against the provider itself."""

from hooklatch_acme import signature

from hooklatch.testing import ProviderConformance, json_body


class TestAcmeConformance(ProviderConformance):
    provider = "acme"
    secret, other_secret = "acme-secret-one", "acme-secret-two"
    signature_headers = ("X-Acme-Signature",)
    signs_timestamp = True
    several_signatures = True

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)

    def sign_several(self, body, *, secrets, now, url):
        timestamp = int(now.timestamp())
        entries = ",".join(f"v1={signature(s, timestamp, body)}" for s in secrets)
        return {"X-Acme-Timestamp": str(timestamp), "X-Acme-Signature": entries}

    def event_body(self, event_id, *, note="hello"):
        return json_body({"id": event_id, "kind": "order.shipped", "at": 1700000000, "note": note})
