"""Providers that break the contract one way each, and a description of them for the
conformance kit: what the kit must report (tests/unit/test_conformance_kit.py)."""

import json
from datetime import timedelta

from hooklatch.providers import (
    IncomingEvent,
    Provider,
    VerificationError,
    id_and_type,
    json_object,
    require_header,
    unix_timestamp,
)
from hooklatch.providers.signing import check_signatures, check_timestamp, hmac_hex
from hooklatch.testing import json_body
from tests.support.providers import SignsWithEachSecret


def signature(secret, timestamp, body):
    return hmac_hex(secret, b"%d." % timestamp + body)


def kit_headers(body, *, secrets, now):
    """The kit provider's scheme: X-Kit-Signature holds a "v1=<hex>" entry per secret."""
    timestamp = int(now.timestamp())
    entries = ",".join(f"v1={signature(s, timestamp, body)}" for s in secrets)
    return {"X-Kit-Timestamp": str(timestamp), "X-Kit-Signature": entries}


class KitProvider(Provider):
    """Right: X-Kit-Signature is "v1=<hex>[,v1=<hex>]" over "<X-Kit-Timestamp>.<body>"."""

    name = "kit"
    retry_window = timedelta(days=1)

    def verify(self, delivery, *, secrets, now):
        timestamp = unix_timestamp(require_header(delivery, "X-Kit-Timestamp")) or 0
        check_signatures(
            require_header(delivery, "X-Kit-Signature").split(","),
            secrets=secrets,
            sign=lambda secret: f"v1={signature(secret, timestamp, delivery.body)}",
            refusal="no signature matches an active secret",
        )
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery):
        payload = json_object(delivery.body)
        event_id, kind = id_and_type(payload, type_field="kind", what="a kit event")
        return [IncomingEvent(event_id, kind, id_signed=True)]

    def sign(self, delivery, *, secret, now):
        return kit_headers(delivery.body, secrets=[secret], now=now)

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


class KitCase(SignsWithEachSecret):
    """How the kit provider signs: its scheme, kit_headers."""

    provider = KitProvider
    secret, other_secret = "kit-secret-one", "kit-secret-two"
    signature_headers = ("X-Kit-Signature",)
    signs_timestamp = True

    def sign_several(self, body, *, secrets, now, url):
        return kit_headers(body, secrets=secrets, now=now)

    def event_body(self, event_id, *, note="hello"):
        return json.dumps({"id": event_id, "kind": "k", "note": note}).encode()


class AcceptsAnythingCase(KitCase):
    provider = AcceptsAnything


class WrongIdsCase(KitCase):
    provider = WrongIds


class RefusesAllCase(KitCase):
    provider = RefusesAll
