"""Providers that break the contract one way each, and a description of them for the
conformance kit: what the kit must report (tests/unit/test_conformance_kit.py)."""

import json
from datetime import timedelta

from hooklatch.providers import (
    IncomingEvent,
    Provider,
    VerificationError,
    any_digest_matches,
    check_timestamp,
    hmac_hex,
    json_object,
    require_header,
    require_secrets,
    unix_timestamp,
)
from hooklatch.testing import ProviderConformance, json_body


def signature(secret, timestamp, body):
    return hmac_hex(secret, b"%d." % timestamp + body)


class KitProvider(Provider):
    """Right: X-Kit-Signature is "v1=<hex>[,v1=<hex>]" over "<X-Kit-Timestamp>.<body>"."""

    name = "kit"
    retry_window = timedelta(days=1)

    def verify(self, delivery, *, secrets, now):
        timestamp = unix_timestamp(require_header(delivery, "X-Kit-Timestamp"))
        received = require_header(delivery, "X-Kit-Signature").split(",")
        require_secrets(secrets)
        expected = [f"v1={signature(s, timestamp or 0, delivery.body)}" for s in secrets]
        if not any_digest_matches(expected, received):
            raise VerificationError("no signature matches an active secret")
        check_timestamp(timestamp or 0, now=now, tolerance=self.tolerance)

    def parse(self, delivery):
        payload = json_object(delivery.body)
        return [IncomingEvent(payload["id"], payload["kind"], id_signed=True)]

    def sign(self, delivery, *, secret, now):
        timestamp = int(now.timestamp())
        return {
            "X-Kit-Timestamp": str(timestamp),
            "X-Kit-Signature": f"v1={signature(secret, timestamp, delivery.body)}",
        }

    def sample_event(self, *, now):
        return {"Content-Type": "application/json"}, json_body({"id": "evt_1", "kind": "k"})


class AcceptsAnything(KitProvider):
    """Checks nothing, and decodes the body without care."""

    def verify(self, delivery, *, secrets, now):
        pass

    def parse(self, delivery):
        payload = json.loads(delivery.body)
        return [IncomingEvent(payload["id"], payload["kind"], id_signed=True)]


class WrongIds(KitProvider):
    """Verifies, but gives every event the same id."""

    def parse(self, delivery):
        return [IncomingEvent("evt_same", "k", id_signed=True)]


class RefusesAll(KitProvider):
    def verify(self, delivery, *, secrets, now):
        raise VerificationError("refused", reason="bad_signature")


class KitCase(ProviderConformance):
    """How the kit provider signs, written from its scheme rather than its sign()."""

    provider = KitProvider
    secret = "kit-secret-one"
    other_secret = "kit-secret-two"
    signature_headers = ("X-Kit-Signature",)
    signs_timestamp = True
    several_signatures = True

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)

    def sign_several(self, body, *, secrets, now, url):
        timestamp = int(now.timestamp())
        entries = ",".join(f"v1={signature(s, timestamp, body)}" for s in secrets)
        return {"X-Kit-Timestamp": str(timestamp), "X-Kit-Signature": entries}

    def event_body(self, event_id, *, note="hello"):
        return json.dumps({"id": event_id, "kind": "k", "note": note}).encode()


class AcceptsAnythingCase(KitCase):
    provider = AcceptsAnything


class WrongIdsCase(KitCase):
    provider = WrongIds


class RefusesAllCase(KitCase):
    provider = RefusesAll
