"""Signature schemes that more than one sender uses, written once for their providers.

- ``TimestampedHeader``: one header of ``key=value`` items, a unix time and one or more
  hex HMAC-SHA256 signatures of the time and the body (Stripe, Paddle).
- ``V0Signature``: ``v0=<hex>`` in one header and the unix time in another, HMAC-SHA256
  over ``v0:{time}:{body}`` (Slack, and Zoom, which copied it).
- ``public_key_verifies``: a signature made with the sender's private key, checked with
  the public key the endpoint holds (Discord, SendGrid, Standard Webhooks' ``v1a``).

Each signs with the whole secret as UTF-8, checks every active secret (``check_signatures``)
and then the time, within the provider's tolerance. A ``SchemeProvider`` names its scheme,
which verifies its deliveries and signs its test deliveries.
"""

from __future__ import annotations

import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import ClassVar, Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import Delivery, Provider, require_header
from hooklatch.providers.parsing import unix_timestamp
from hooklatch.providers.signing import (
    check_signatures,
    check_timestamp,
    hmac_hex,
    timestamped_signatures,
)

V0 = "v0="


@dataclass(frozen=True)
class TimestampedHeader:
    """``{header}: {timestamp_key}=<unix>{separator}{signature_key}=<hex>...`` over
    ``{unix}{joiner}{body}``: Stripe's ``t=...,v1=...`` over ``t.body``, Paddle's
    ``ts=...;h1=...`` over ``ts:body``. Several signatures (one per secret while the sender
    rolls one) verify if any matches."""

    header: str
    separator: str
    timestamp_key: str
    signature_key: str
    joiner: bytes
    # Whether a refusal's log line names the header's shape (Stripe's does).
    logs_shape: bool = False

    def signature(self, secret: str, timestamp: int, body: bytes) -> str:
        return hmac_hex(secret, str(timestamp).encode() + self.joiner + body)

    def verify(
        self, delivery: Delivery, *, secrets: Sequence[str], now: datetime, tolerance: timedelta
    ) -> None:
        timestamp, signatures = timestamped_signatures(
            require_header(delivery, self.header),
            name=self.header,
            separator=self.separator,
            timestamp_key=self.timestamp_key,
            signature_key=self.signature_key,
        )
        check_signatures(
            signatures,
            secrets=secrets,
            sign=lambda secret: self.signature(secret, timestamp, delivery.body),
            refusal=f"no {self.signature_key} signature matches an active secret",
            facts=self._shape(len(signatures)),
        )
        check_timestamp(timestamp, now=now, tolerance=tolerance)

    def _shape(self, count: int) -> dict[str, str] | None:
        if not self.logs_shape:
            return None
        return {"scheme": f"{self.timestamp_key}= and {count} {self.signature_key}="}

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = int(now.timestamp())
        signature = self.signature(secret, timestamp, delivery.body)
        items = (f"{self.timestamp_key}={timestamp}", f"{self.signature_key}={signature}")
        return {self.header: self.separator.join(items)}


@dataclass(frozen=True)
class V0Signature:
    """``{signature_header}: v0=<hex>`` and ``{timestamp_header}: <unix>``, HMAC-SHA256 over
    ``v0:{timestamp}:{body}`` with the timestamp as sent (it is signed verbatim)."""

    signature_header: str
    timestamp_header: str

    def read(self, delivery: Delivery) -> tuple[str, str]:
        """The signature and the timestamp, as sent."""
        signature = require_header(delivery, self.signature_header)
        timestamp = require_header(delivery, self.timestamp_header)
        if not signature.startswith(V0):
            raise MalformedRequest(
                f"{self.signature_header} must start with {V0}", reason="malformed_header"
            )
        if unix_timestamp(timestamp) is None:
            raise MalformedRequest(
                f"{self.timestamp_header} must be a unix time", reason="malformed_header"
            )
        return signature, timestamp

    def signature(self, secret: str, timestamp: str, body: bytes) -> str:
        return V0 + hmac_hex(secret, b"v0:" + timestamp.encode() + b":" + body)

    def verify(
        self, delivery: Delivery, *, secrets: Sequence[str], now: datetime, tolerance: timedelta
    ) -> None:
        signature, timestamp = self.read(delivery)
        check_signatures(
            [signature],
            secrets=secrets,
            sign=lambda secret: self.signature(secret, timestamp, delivery.body),
        )
        check_timestamp(int(timestamp), now=now, tolerance=tolerance)

    def verifying_secret(self, delivery: Delivery, secrets: Sequence[str]) -> str:
        """The first of ``secrets`` that signed this request (Zoom keys its handshake
        answer with it)."""
        signature, timestamp = self.read(delivery)
        for secret in secrets:
            if hmac.compare_digest(self.signature(secret, timestamp, delivery.body), signature):
                return secret
        raise VerificationError("the signature matches no active secret")

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = str(int(now.timestamp()))
        return {
            self.timestamp_header: timestamp,
            self.signature_header: self.signature(secret, timestamp, delivery.body),
        }


class Scheme(Protocol):
    def verify(
        self, delivery: Delivery, *, secrets: Sequence[str], now: datetime, tolerance: timedelta
    ) -> None: ...

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]: ...


class SchemeProvider(Provider):
    """A provider whose deliveries are signed by a shared ``scheme``: it verifies them
    within the provider's ``tolerance``, and signs its test deliveries."""

    scheme: ClassVar[Scheme]

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        self.scheme.verify(delivery, secrets=secrets, now=now, tolerance=self.tolerance)

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return self.scheme.sign(delivery, secret=secret, now=now)


def public_key_verifies(
    key: Ed25519PublicKey | ec.EllipticCurvePublicKey, signature: bytes, message: bytes
) -> bool:
    """Whether ``signature`` is the key's signature of ``message``: Ed25519, or ECDSA with
    SHA-256 for an elliptic-curve key."""
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(signature, message, ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(signature, message)
    except InvalidSignature:
        return False
    return True
