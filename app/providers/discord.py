"""Discord: ``X-Signature-Ed25519`` (hex), an Ed25519 signature of timestamp + body.

The endpoint's secret is the application's public key (64 hex digits, from the
developer portal); only Discord can sign. One URL receives two kinds of request:

- Interactions: stored under the interaction ``id`` (a snowflake, so ``occurred_at``
  comes from it), typed by interaction type (``application_command``,
  ``message_component``, ...). A PING (``{"type": 1}``) is answered ``{"type": 1}``.
- Webhook Events (``{"type": 1, "event": {...}}``): Discord sends no delivery id. They
  are stored under ``{application_id}:{event.type}:{event.timestamp}``, followed by
  ``:{data.id}`` or ``:{data.user.id}`` when the event has one; a retry re-sends the
  same event, so the same key. A PING (``{"type": 0}``) is answered 204.

Discord sends deliberately bad signatures to check that they are refused: they are,
since handshakes are answered only after ``verify``.

hooklatch answers an interaction it stores with its usual JSON, which is not an
interaction response: a handler must answer through Discord's callback API in time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import (
    Delivery,
    HandshakeResponse,
    IncomingEvent,
    Provider,
    require_header,
)
from hooklatch.providers.parsing import (
    NOT_JSON,
    json_object,
    occurred_at,
    unix_time,
    unix_timestamp,
)
from hooklatch.providers.schemes import public_key_verifies
from hooklatch.providers.signing import check_timestamp, require_secrets

PING = 1
WEBHOOK_PING = 0
INTERACTION_TYPES = {
    2: "application_command",
    3: "message_component",
    4: "application_command_autocomplete",
    5: "modal_submit",
}
DISCORD_EPOCH_MS = 1420070400000


def _public_key(secret: str) -> Ed25519PublicKey | None:
    try:
        return Ed25519PublicKey.from_public_bytes(bytes.fromhex(secret.strip()))
    except ValueError:
        return None


def _signature_headers(delivery: Delivery) -> tuple[bytes, str]:
    """The signature (64 bytes) and the timestamp, as sent."""
    signature = require_header(delivery, "X-Signature-Ed25519")
    timestamp = require_header(delivery, "X-Signature-Timestamp")
    try:
        raw = bytes.fromhex(signature)
    except ValueError:
        raw = b""
    if len(raw) != 64:
        raise MalformedRequest(
            "X-Signature-Ed25519 must be 128 hex digits", reason="malformed_header"
        )
    if unix_timestamp(timestamp) is None:
        raise MalformedRequest(
            "X-Signature-Timestamp must be a unix time", reason="malformed_header"
        )
    return raw, timestamp


class DiscordProvider(Provider):
    name = "discord"
    # Webhook Events are retried for up to ten minutes; interactions are not retried.
    retry_window = timedelta(days=1)
    # Discord documents no window. Fifteen minutes outlasts its ten minutes of retries,
    # in case a retry carries its first timestamp; a replay inside the window is caught
    # by the dedupe key.
    tolerance = timedelta(minutes=15)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        raw, timestamp = _signature_headers(delivery)
        require_secrets(secrets)
        keys = [key for key in map(_public_key, secrets) if key is not None]
        if not keys:
            raise VerificationError(
                "no active secret is an Ed25519 public key (64 hex digits)", reason="no_secret"
            )
        message = timestamp.encode() + delivery.body
        if not any(public_key_verifies(key, raw, message) for key in keys):
            raise VerificationError("the signature matches no active public key")
        check_timestamp(int(timestamp), now=now, tolerance=self.tolerance)

    def handshake(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        try:
            payload = json.loads(delivery.body)
        except NOT_JSON:
            return None  # parse refuses it
        if not isinstance(payload, dict):
            return None
        kind = _int(payload.get("type"))
        if kind == PING and "event" not in payload:
            return HandshakeResponse(json.dumps({"type": PING}).encode())
        if kind == WEBHOOK_PING:
            return HandshakeResponse(b"", content_type="text/plain", status=204)
        return None

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        if "event" in payload:
            return [_webhook_event(payload)]
        return [_interaction(payload)]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        raise ValueError(
            "a discord endpoint holds Discord's public key, which cannot sign: "
            "send a test from the Discord developer portal instead"
        )

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        snowflake = (int(now.timestamp() * 1000) - DISCORD_EPOCH_MS) << 22
        payload = {
            "id": str(snowflake),
            "application_id": "1000000000000000000",
            "type": 2,
            "token": "demo-interaction-token",
            "version": 1,
            "data": {"id": "1000000000000000001", "name": "hello", "type": 1},
            "channel_id": "1000000000000000002",
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _interaction(payload: JSONObject) -> IncomingEvent:
    interaction_id, kind = payload.get("id"), _int(payload.get("type"))
    snowflake = _text(interaction_id)
    if snowflake is None or not (snowflake.isascii() and snowflake.isdigit()) or kind is None:
        raise MalformedRequest(
            "an interaction needs a snowflake id and an integer type", reason="malformed_body"
        )
    return IncomingEvent(
        external_id=snowflake,
        type=INTERACTION_TYPES.get(kind, f"interaction_{kind}"),
        occurred_at=_snowflake_time(snowflake),
        id_signed=True,
    )


def _snowflake_time(snowflake: str) -> datetime | None:
    """A snowflake's top bits are milliseconds since Discord's epoch (2015)."""
    try:
        milliseconds = (int(snowflake) >> 22) + DISCORD_EPOCH_MS
    except ValueError:  # more digits than int() reads
        return None
    return unix_time(milliseconds, milliseconds=True)


def _webhook_event(payload: JSONObject) -> IncomingEvent:
    event = payload.get("event")
    fields = event if isinstance(event, dict) else {}
    application_id = _text(payload.get("application_id"))
    kind, stamp = _text(fields.get("type")), _text(fields.get("timestamp"))
    if application_id is None or kind is None or stamp is None:
        raise MalformedRequest(
            "a webhook event needs application_id, event.type and event.timestamp",
            reason="malformed_body",
        )
    subject = _subject(fields.get("data"))
    key = f"{application_id}:{kind}:{stamp}" + (f":{subject}" if subject is not None else "")
    return IncomingEvent(external_id=key, type=kind, occurred_at=occurred_at(stamp), id_signed=True)


def _subject(data: JSON) -> str | None:
    """What the event is about: its own id (an entitlement, a message) or its user's."""
    if not isinstance(data, dict):
        return None
    user = data.get("user")
    return _text(data.get("id")) or (_text(user.get("id")) if isinstance(user, dict) else None)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
