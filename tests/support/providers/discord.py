"""How Discord signs a test request, for the conformance kit and the tests.

Discord signs with its own private key and publishes no signer; requests here are
signed with key pairs made by ``cryptography``, and the fixed vector below (PyNaCl,
seed of 32 zero bytes; both official discord-interactions verifiers accept it) checks
the provider against a signature we did not make.
"""

import hashlib
import json
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hooklatch.testing import ProviderConformance
from tests.support.providers import without_content_type

VECTOR_PUBLIC_KEY = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
VECTOR_TIMESTAMP = "1700000000"
VECTOR_BODY = b'{"type":1}'
VECTOR_SIGNATURE = (
    "f2053542c8500e9bf6b68eb1efc69823f8c01c7718ab0353b125826418494b6e"
    "d523027cf852f54edf27d3d3e13f3de15968b6df027ae1fc5dcab21f0b7ff30c"
)

PRIVATE_KEYS: dict[str, Ed25519PrivateKey] = {}  # public key (hex) -> its private key


def key_pair() -> str:
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes_raw().hex()
    PRIVATE_KEYS[public] = private
    return public


APP_KEY, OTHER_KEY = key_pair(), key_pair()


def discord_headers(body: bytes, public_key: str, *, now: datetime | None = None):
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    signature = PRIVATE_KEYS[public_key].sign(timestamp.encode() + body)
    return {
        "Content-Type": "application/json",
        "X-Signature-Ed25519": signature.hex(),
        "X-Signature-Timestamp": timestamp,
    }


def snowflake(name: str) -> str:
    return str(int.from_bytes(hashlib.sha256(name.encode()).digest()[:7], "big"))


def command(interaction_id: str, *, text: str = "hello") -> bytes:
    payload = {
        "id": interaction_id,
        "application_id": "1181000000000000000",
        "type": 2,
        "token": "interaction-token",
        "version": 1,
        "data": {
            "id": "1",
            "name": "echo",
            "type": 1,
            "options": [{"name": "text", "value": text}],
        },
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def webhook_event(user_id: str) -> bytes:
    payload = {
        "version": 1,
        "application_id": "1181000000000000000",
        "type": 1,
        "event": {
            "type": "APPLICATION_AUTHORIZED",
            "timestamp": "2024-10-18T14:42:53.064834",
            "data": {
                "integration_type": 1,
                "scopes": ["applications.commands"],
                "user": {"id": user_id, "username": "someone"},
            },
        },
    }
    return json.dumps(payload).encode()


class DiscordCase(ProviderConformance):
    provider = "discord"
    secret, other_secret = APP_KEY, OTHER_KEY
    signature_headers = ("X-Signature-Ed25519",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return without_content_type(discord_headers(body, secret, now=now))

    def event_body(self, event_id, *, note="hello"):
        return command(snowflake(event_id), text=note)

    def expected_ids(self, event_id):
        return (snowflake(event_id),)
