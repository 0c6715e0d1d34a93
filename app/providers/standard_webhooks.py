"""Standard Webhooks (Svix, and the senders built on it: Clerk, Resend, Supabase Auth Hooks,
Replicate; GitLab's signing tokens reuse this module).

Headers ``webhook-id``, ``webhook-timestamp`` (unix seconds) and ``webhook-signature``, or
the same three named ``svix-``. The signed content is ``{id}.{timestamp}.{raw body}``.
``webhook-signature`` is a space-separated list, and one entry that verifies with one
active secret accepts the request:

- ``v1,<base64 HMAC-SHA256>``, keyed with the base64-decoded part of a ``whsec_`` secret
  (missing ``=`` padding tolerated; Supabase shows the secret as ``v1,whsec_...``, which
  is accepted as it is);
- ``v1a,<base64 Ed25519 signature>``, checked with a ``whpk_`` public key (base64 of its
  32 raw bytes) stored as the endpoint's secret.

An entry that cannot be read (no comma, bad base64) matches nothing: it is skipped where
the reference library raises ``binascii.Error``. A header with no readable entry is
malformed. The timestamp may be 5 minutes off either way. The id is the dedupe key: the
spec keeps it the same on every retry of one message.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.parsing import load_json, occurred_at, unix_timestamp
from hooklatch.providers.schemes import public_key_verifies
from hooklatch.providers.signing import (
    any_digest_matches,
    check_timestamp,
    hmac_base64,
    hmac_sha256,
    require_secrets,
)

HMAC_SCHEME = "v1"
ED25519_SCHEME = "v1a"
WHSEC_PREFIX = "whsec_"
PUBLIC_KEY_PREFIX = "whpk_"
SUPABASE_PREFIX = "v1,"  # how Supabase's dashboard shows a whsec_ secret
HEADER_SETS = ("webhook", "svix")


@dataclass(frozen=True)
class Signed:
    """What the standard headers of one request say."""

    prefix: str  # "webhook" or "svix"
    message_id: str
    timestamp: int
    signatures: tuple[tuple[str, bytes], ...]  # (scheme, decoded signature)

    def content(self, body: bytes) -> bytes:
        return signed_content(self.message_id, self.timestamp, body)

    def of(self, scheme: str) -> list[bytes]:
        return [signature for name, signature in self.signatures if name == scheme]


def signed_content(message_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{message_id}.{timestamp}.".encode() + body


def _b64decode(text: str) -> bytes | None:
    """Strict base64, tolerating missing ``=`` padding; None when it is not base64."""
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def hmac_key(secret: str) -> bytes | None:
    """The HMAC key in a ``whsec_`` secret (or ``v1,whsec_``); None if the secret is not one."""
    if secret.startswith(PUBLIC_KEY_PREFIX):
        return None
    encoded = secret.removeprefix(SUPABASE_PREFIX).removeprefix(WHSEC_PREFIX)
    return _b64decode(encoded) or None


def public_key(secret: str) -> Ed25519PublicKey | None:
    """The Ed25519 key in a ``whpk_`` secret; None if the secret is not one."""
    if not secret.startswith(PUBLIC_KEY_PREFIX):
        return None
    raw = _b64decode(secret.removeprefix(PUBLIC_KEY_PREFIX))
    if raw is None or len(raw) != 32:
        return None
    return Ed25519PublicKey.from_public_bytes(raw)


def v1_signature(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The ``v1,<base64>`` entry for this message, signed with a ``whsec_`` secret."""
    key = hmac_key(secret)
    if key is None:
        raise ValueError("a Standard Webhooks signing secret looks like whsec_<base64>")
    return f"{HMAC_SCHEME},{hmac_base64(key, signed_content(message_id, timestamp, body))}"


def signed_headers(secret: str, message_id: str, *, now: datetime, body: bytes) -> dict[str, str]:
    """The ``webhook-*`` headers of a message signed now with a ``whsec_`` secret."""
    timestamp = int(now.timestamp())
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": v1_signature(secret, message_id, timestamp, body),
    }


def header_prefix(delivery: Delivery, prefixes: Sequence[str] = HEADER_SETS) -> str:
    """Which header set the request uses: the first whose signature header is present."""
    for prefix in prefixes:
        if delivery.header(f"{prefix}-signature"):
            return prefix
    raise MalformedRequest(f"missing header {prefixes[0]}-signature", reason="missing_header")


def read_headers(
    delivery: Delivery,
    *,
    schemes: Sequence[str] = (HMAC_SCHEME, ED25519_SCHEME),
    prefixes: Sequence[str] = HEADER_SETS,
) -> Signed:
    prefix = header_prefix(delivery, prefixes)
    header = require_header(delivery, f"{prefix}-signature")
    message_id = require_header(delivery, f"{prefix}-id")
    timestamp = unix_timestamp(require_header(delivery, f"{prefix}-timestamp"))
    if timestamp is None:
        raise MalformedRequest(
            f"{prefix}-timestamp must be unix seconds", reason="malformed_header"
        )
    signatures = []
    for entry in header.split():
        scheme, comma, encoded = entry.partition(",")
        decoded = _b64decode(encoded) if comma and scheme in schemes else None
        if decoded:
            signatures.append((scheme, decoded))
    if not signatures:
        wanted = " or ".join(f"{scheme},<base64>" for scheme in schemes)
        raise MalformedRequest(
            f"{prefix}-signature has no readable {wanted} entry", reason="malformed_header"
        )
    return Signed(prefix, message_id, timestamp, tuple(signatures))


def verify_signed(
    delivery: Delivery,
    *,
    secrets: Sequence[str],
    now: datetime,
    tolerance: timedelta,
    schemes: Sequence[str] = (HMAC_SCHEME, ED25519_SCHEME),
    prefixes: Sequence[str] = HEADER_SETS,
) -> Signed:
    """Check a Standard Webhooks signature; returns what the headers said."""
    signed = read_headers(delivery, schemes=schemes, prefixes=prefixes)
    require_secrets(secrets)
    keys = [key for s in secrets if (key := hmac_key(s))] if HMAC_SCHEME in schemes else []
    public_keys = (
        [pk for s in secrets if (pk := public_key(s))] if ED25519_SCHEME in schemes else []
    )
    if not keys and not public_keys:
        kinds = "a whsec_ secret" + (" or a whpk_ public key" if ED25519_SCHEME in schemes else "")
        raise VerificationError(f"no active secret is {kinds}", reason="no_secret")
    content = signed.content(delivery.body)
    expected = [hmac_sha256(key, content) for key in keys]
    matched = any_digest_matches(expected, signed.of(HMAC_SCHEME))
    matched = matched or any(
        public_key_verifies(key, signature, content)
        for key in public_keys
        for signature in signed.of(ED25519_SCHEME)
    )
    if not matched:
        raise VerificationError(f"no {signed.prefix}-signature entry matches an active secret")
    check_timestamp(signed.timestamp, now=now, tolerance=tolerance)
    return signed


class StandardWebhooksProvider(Provider):
    name = "standard-webhooks"
    # Svix retries a message 7 times over about 28 hours (5 s, 5 min, 30 min, 2 h, 5 h,
    # 10 h, 10 h) with the same id; the spec only recommends a schedule, so keep margin.
    retry_window = timedelta(days=3)
    tolerance = timedelta(minutes=5)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        verify_signed(delivery, secrets=secrets, now=now, tolerance=self.tolerance)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        message_id = require_header(delivery, f"{header_prefix(delivery)}-id")
        payload = load_json(delivery.body)
        event_type, when = "webhook", None
        if isinstance(payload, dict):
            kind = payload.get("type")
            if isinstance(kind, str) and kind:
                event_type = kind
            when = occurred_at(payload.get("timestamp"))
        # webhook-id is part of the signed content.
        return [
            IncomingEvent(external_id=message_id, type=event_type, occurred_at=when, id_signed=True)
        ]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        if secret.startswith(PUBLIC_KEY_PREFIX):
            raise ValueError(
                "this endpoint verifies Ed25519 signatures with a whpk_ public key: only the "
                "sender holds the private key that signs"
            )
        message_id = delivery.header("webhook-id") or f"msg_{uuid.uuid4().hex}"
        return signed_headers(secret, message_id, now=now, body=delivery.body)

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "type": "user.created",
            "timestamp": now.isoformat(),
            "data": {"id": f"user_demo_{int(now.timestamp())}", "email": "ada@example.com"},
        }
        headers = {"Content-Type": "application/json", "webhook-id": f"msg_{uuid.uuid4().hex}"}
        return headers, json.dumps(payload).encode()
