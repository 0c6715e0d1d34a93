"""Secrets at rest: MultiFernet over HOOKLATCH_SECRET_KEYS (first key encrypts, all decrypt)."""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class SecretBox:
    def __init__(self, keys: tuple[str, ...]) -> None:
        if not keys:
            raise ValueError("at least one Fernet key is required")
        self._fernet = MultiFernet([Fernet(key) for key in keys])

    def encrypt(self, plaintext: str) -> bytes:
        return self._fernet.encrypt(plaintext.encode())

    def decrypt(self, token: bytes) -> str:
        try:
            return self._fernet.decrypt(token).decode()
        except InvalidToken:
            raise ValueError(
                "an endpoint secret cannot be decrypted with HOOKLATCH_SECRET_KEYS "
                "(was the key that encrypted it removed?)"
            ) from None

    def rotate(self, token: bytes) -> bytes:
        return self._fernet.rotate(token)


def generate_key() -> str:
    return Fernet.generate_key().decode()
