"""How generic-hmac signs a test request in two configurations (with the stdlib), for the
conformance kit and the tests."""

import base64
import hashlib
import hmac
import json

from hooklatch.testing import ProviderConformance

STRIPE_LIKE = {
    "header": "X-Acme-Signature",
    "prefix": "sha256=",
    "signed": "timestamp.body",
    "timestamp_header": "X-Acme-Timestamp",
    "id_header": "X-Acme-Delivery",
    "type_field": "type",
}
SQUARE_LIKE = {
    "header": "X-Beta-Signature",
    "algorithm": "sha512",
    "encoding": "base64",
    "signed": "url+body",
    "id_field": "event.id",
    "type_header": "X-Beta-Event",
}


class GenericHmacTimestampCase(ProviderConformance):
    """Hex SHA-256 with a prefix over ``timestamp.body``; id in a header, type in the body."""

    provider = "generic-hmac"
    secret, other_secret = "acme-secret-old", "acme-secret-new"
    signature_headers = ("X-Acme-Signature",)
    signs_timestamp = True
    options = STRIPE_LIKE
    delivery_id = "no-event-body"  # set by event_body: the id travels in a header

    def sign(self, body, *, secret, now, url):
        stamp = int(now.timestamp())
        digest = hmac.new(secret.encode(), b"%d." % stamp + body, hashlib.sha256).hexdigest()
        return {
            "X-Acme-Signature": f"sha256={digest}",
            "X-Acme-Timestamp": str(stamp),
            "X-Acme-Delivery": self.delivery_id,
        }

    def event_body(self, event_id, *, note="hello"):
        self.delivery_id = event_id
        return json.dumps({"type": "order.paid", "note": note}, ensure_ascii=False).encode()


class GenericHmacUrlCase(ProviderConformance):
    """Base64 SHA-512 over the public URL and the body; id in the body, type in a header."""

    provider = "generic-hmac"
    secret, other_secret = "beta-secret-old", "beta-secret-new"
    signature_headers = ("X-Beta-Signature",)
    options = SQUARE_LIKE

    def sign(self, body, *, secret, now, url):
        digest = hmac.new(secret.encode(), url.encode() + body, hashlib.sha512).digest()
        return {
            "X-Beta-Signature": base64.b64encode(digest).decode(),
            "X-Beta-Event": "shipment.sent",
        }

    def event_body(self, event_id, *, note="hello"):
        payload = {"event": {"id": event_id, "note": note}}
        return json.dumps(payload, ensure_ascii=False).encode()
