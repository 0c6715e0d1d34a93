"""Secrets at rest: MultiFernet over HOOKLATCH_SECRET_KEYS (first key encrypts, all decrypt)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

# HKDF's info label for the fingerprint key: a key of its own, never the Fernet key itself.
FINGERPRINT_INFO = b"hooklatch secret fingerprint"
UNDECRYPTABLE = (
    "an endpoint secret cannot be decrypted with HOOKLATCH_SECRET_KEYS "
    "(was the key that encrypted it removed?)"
)


class SecretBox:
    def __init__(self, keys: tuple[str, ...]) -> None:
        if not keys:
            raise ValueError("at least one Fernet key is required")
        self._fernet = MultiFernet([Fernet(key) for key in keys])
        self._fingerprint_key = HKDF(
            algorithm=hashes.SHA256(), length=32, salt=None, info=FINGERPRINT_INFO
        ).derive(base64.urlsafe_b64decode(keys[0]))

    def encrypt(self, plaintext: str) -> bytes:
        return self._fernet.encrypt(plaintext.encode())

    def decrypt(self, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            raise ValueError(UNDECRYPTABLE) from None

    def rotate(self, token: bytes) -> bytes:
        """The same plaintext, encrypted with the first key."""
        try:
            return self._fernet.rotate(token)
        except InvalidToken:
            raise ValueError(UNDECRYPTABLE) from None

    def fingerprint(self, secret: str) -> str:
        """12 hex digits that tell secrets apart: an HMAC under a key derived from the first
        key, so that a dump of the table cannot be used to guess a low-entropy secret."""
        return hmac.new(self._fingerprint_key, secret.encode(), hashlib.sha256).hexdigest()[:12]


def generate_key() -> str:
    return Fernet.generate_key().decode()
