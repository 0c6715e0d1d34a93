"""How Stripe signs a test request (stripe-python's own signer), for the conformance kit."""

import hashlib
import hmac
import json

from tests.support.providers import SignsWithEachSecret
from tests.support.signing import stripe_headers


class StripeCase(SignsWithEachSecret):
    provider = "stripe"
    secret, other_secret = "whsec_conformance_old", "whsec_conformance_new"
    signature_headers = ("Stripe-Signature",)
    signs_timestamp = True

    def sign_several(self, body, *, secrets, now, url):
        timestamp = int(now.timestamp())
        try:
            body.decode()
        except UnicodeDecodeError:
            # stripe-python signs text only; Stripe's scheme is HMAC-SHA256 over the bytes.
            message = b"%d." % timestamp + body
            digests = [hmac.new(s.encode(), message, hashlib.sha256).hexdigest() for s in secrets]
            return {"Stripe-Signature": ",".join([f"t={timestamp}", *(f"v1={d}" for d in digests)])}
        first, *rest = secrets
        headers = stripe_headers(body, first, timestamp, extra_secrets=rest)
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
