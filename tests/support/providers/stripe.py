"""How Stripe signs a test request (stripe-python's own signer), for the conformance kit."""

import hashlib
import hmac
import json

from hooklatch.testing import ProviderConformance
from tests.support.signing import stripe_headers


class StripeCase(ProviderConformance):
    provider = "stripe"
    secret = "whsec_conformance_old"
    other_secret = "whsec_conformance_new"
    signature_headers = ("Stripe-Signature",)
    signs_timestamp = True
    several_signatures = True

    def sign(self, body, *, secret, now, url):
        timestamp = int(now.timestamp())
        try:
            body.decode()
        except UnicodeDecodeError:
            # stripe-python signs text only; Stripe's scheme is HMAC-SHA256 over the bytes.
            digest = hmac.new(secret.encode(), b"%d." % timestamp + body, hashlib.sha256)
            return {"Stripe-Signature": f"t={timestamp},v1={digest.hexdigest()}"}
        return {"Stripe-Signature": stripe_headers(body, secret, timestamp)["Stripe-Signature"]}

    def sign_several(self, body, *, secrets, now, url):
        first, *rest = secrets
        headers = stripe_headers(body, first, int(now.timestamp()), extra_secrets=rest)
        return {"Stripe-Signature": headers["Stripe-Signature"]}

    def event_body(self, event_id, *, note="hello"):
        payload = {
            "id": event_id,
            "object": "event",
            "type": "invoice.paid",
            "created": 1700000000,
            "data": {"object": {"id": "in_1", "description": note}},
        }
        return json.dumps(payload, ensure_ascii=False).encode()
