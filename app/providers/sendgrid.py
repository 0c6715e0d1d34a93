"""SendGrid Event Webhook: ECDSA P-256/SHA-256 over ``timestamp + body``.

``X-Twilio-Email-Event-Webhook-Signature`` is a base64 DER signature, made with
SendGrid's private key, of ``X-Twilio-Email-Event-Webhook-Timestamp`` followed by the raw
body. The endpoint's secret is SendGrid's *public* key, as the SendGrid console shows it
(base64 DER SubjectPublicKeyInfo; a PEM block is accepted too), so hooklatch can verify a
delivery but never sign one.

The body is a JSON array of events. Each becomes one event, deduplicated on its
``sg_event_id``; the type is its ``event`` field (``delivered``, ``open``, ``bounce``...)
and it occurred at its ``timestamp``. An element without ``sg_event_id`` (the console's
"Test Your Integration" sends such) is keyed on a digest of its own content, so a byte-
identical re-send is still a duplicate.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import lru_cache

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_der_public_key, load_pem_public_key

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.jsontypes import JSON
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.parsing import json_digest, load_json, unix_time, unix_timestamp
from hooklatch.providers.schemes import public_key_verifies
from hooklatch.providers.signing import check_timestamp, require_secrets

SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


@lru_cache(maxsize=256)  # public keys: nothing secret is kept
def public_key(secret: str) -> ec.EllipticCurvePublicKey:
    """The endpoint secret as a P-256 public key; ValueError when it is not one."""
    text = secret.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = load_pem_public_key(text.encode())
        else:
            key = load_der_public_key(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, TypeError) as exc:
        raise ValueError(f"not a base64 DER or PEM public key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError("not an ECDSA P-256 public key")
    return key


class SendGridProvider(Provider):
    name = "sendgrid"
    # SendGrid retries an event "for up to 24 hours after the event occurs"; twice that.
    retry_window = timedelta(days=2)
    # SendGrid does not say whether a retry is signed afresh or carries the first
    # attempt's timestamp. A tolerance as long as the retry window never refuses a
    # genuine retry, and costs nothing in safety: every event in a replay made within it
    # is still a duplicate (dedupe keys are kept at least the retry window, which
    # HOOKLATCH_DEDUPE_RETENTION_DAYS must cover), while anything older is refused.
    tolerance = retry_window

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        encoded = require_header(delivery, SIGNATURE)
        stamp = require_header(delivery, TIMESTAMP).strip()
        try:
            signature = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            signature = b""
        timestamp = unix_timestamp(stamp)
        if not signature or timestamp is None:
            raise MalformedRequest(
                f"{SIGNATURE} must be base64 and {TIMESTAMP} a unix time",
                reason="malformed_header",
            )
        require_secrets(secrets)
        keys = []
        for secret in secrets:
            try:
                keys.append(public_key(secret))
            except ValueError:
                continue  # named below if no secret is usable
        if not keys:
            raise VerificationError(
                "no active secret is a P-256 public key (paste the verification key "
                "from SendGrid's Event Webhook settings)",
                reason="bad_secret",
            )
        message = stamp.encode() + delivery.body
        # Every key is tried, so the time taken does not tell which one matched.
        if not [key for key in keys if public_key_verifies(key, signature, message)]:
            raise VerificationError("the signature matches no active public key")
        check_timestamp(timestamp, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = load_json(delivery.body)
        if not isinstance(payload, list) or not payload:
            raise MalformedRequest(
                "a SendGrid delivery is a non-empty JSON array of events", reason="malformed_body"
            )
        return [self._event(item) for item in payload]

    @staticmethod
    def _event(item: JSON) -> IncomingEvent:
        kind = item.get("event") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(kind, str):
            raise MalformedRequest(
                "each SendGrid event must be an object with a string event",
                reason="malformed_body",
            )
        event_id = item.get("sg_event_id")
        if not isinstance(event_id, str) or not event_id:
            event_id = "sha256:" + json_digest(item)
        return IncomingEvent(event_id, kind, unix_time(item.get("timestamp")), id_signed=True)

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        raise ValueError(
            "SendGrid signs with its private key and hooklatch holds only the public key, "
            "so it cannot sign a test delivery: use 'Test Your Integration' in SendGrid's "
            "Event Webhook settings"
        )

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        events = [
            {
                "email": "someone@example.com",
                "event": "delivered",
                "sg_event_id": f"ZGVtby1kZWxpdmVyZWQt{stamp}",
                "sg_message_id": f"demo.{stamp}",
                "timestamp": stamp,
            }
        ]
        body = json.dumps(events, separators=(",", ":")).encode() + b"\r\n"
        return {"Content-Type": "application/json"}, body
