"""Checking a signature: the HMACs senders sign with, the comparison of every active secret's
signature with every one received, and the signed time. Importable from
``hooklatch.providers`` (docs/plugins.md), as plugins use them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.parsing import unix_timestamp

FAR_OFF = 2**53


def require_secrets(secrets: Sequence[str]) -> None:
    if not secrets:
        raise VerificationError("the endpoint has no active secret", reason="no_secret")


def hmac_sha256(key: str | bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message``; a text key is its UTF-8 bytes, as every provider here
    keys it (Stripe's ``whsec_`` prefix included)."""
    return hmac.new(key.encode() if isinstance(key, str) else key, message, hashlib.sha256).digest()


def hmac_hex(key: str | bytes, message: bytes) -> str:
    return hmac_sha256(key, message).hex()


def hmac_base64(key: str | bytes, message: bytes) -> str:
    return base64.b64encode(hmac_sha256(key, message)).decode()


def timestamped_signatures(
    header: str, *, name: str, separator: str, timestamp_key: str, signature_key: str
) -> tuple[int, list[str]]:
    """A header of ``key=value`` items that carries one timestamp and one or more
    signatures: Stripe's ``t=<unix>,v1=<hex>,v1=<hex>``, Paddle's ``ts=<unix>;h1=<hex>``.
    Other keys are ignored; no timestamp or no signature is malformed_header."""
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(separator):
        key, _, value = item.strip().partition("=")
        if key == timestamp_key:
            timestamp = unix_timestamp(value)
        elif key == signature_key:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise MalformedRequest(
            f"{name} needs {timestamp_key}=<unix time> and at least one "
            f"{signature_key}=<signature>",
            reason="malformed_header",
        )
    return timestamp, signatures


def any_digest_matches(expected: Sequence[bytes | str], received: Sequence[bytes | str]) -> bool:
    """Compare every pair in constant time, without stopping at the first match."""
    matched = False
    for want in expected:
        for got in received:
            a = want.encode() if isinstance(want, str) else want
            b = got.encode() if isinstance(got, str) else got
            matched |= hmac.compare_digest(a, b)
    return matched


def check_signatures(
    received: Sequence[bytes | str],
    *,
    secrets: Sequence[str],
    sign: Callable[[str], bytes | str],
    refusal: str = "the signature matches no active secret",
    facts: Mapping[str, object] | None = None,
) -> None:
    """Refuse the request unless one of the ``received`` signatures is what ``sign(secret)``
    makes with one of the endpoint's active ``secrets``: no_secret without any, else
    bad_signature with ``refusal`` (and ``facts``) where none matches. Every pair is
    compared (``any_digest_matches``), so the time taken does not tell which secret
    matched; call it once the headers are read, and check a signed time after it."""
    require_secrets(secrets)
    if not any_digest_matches([sign(secret) for secret in secrets], received):
        raise VerificationError(refusal, facts=facts)


def check_timestamp(timestamp: int, *, now: datetime, tolerance: timedelta) -> None:
    # Held within what a float counts exactly: an integer past any clock is as stale, or
    # as far in the future, as one at the bound, and cannot overflow the subtraction.
    timestamp = max(-FAR_OFF, min(timestamp, FAR_OFF))
    skew = now.timestamp() - timestamp
    facts = {"timestamp_skew_seconds": round(skew, 1)}
    if skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(skew)} s old (tolerance {int(tolerance.total_seconds())} s)",
            reason="stale_timestamp",
            facts=facts,
        )
    if -skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(-skew)} s in the future (tolerance "
            f"{int(tolerance.total_seconds())} s)",
            reason="future_timestamp",
            facts=facts,
        )
