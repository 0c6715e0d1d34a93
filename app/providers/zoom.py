"""Zoom: ``x-zm-signature: v0=<hex>``, HMAC-SHA256 over ``v0:{timestamp}:{body}``.

The key is the app's Secret Token. ``endpoint.url_validation`` (sent on registration
and every 72 hours) is answered with ``{"plainToken", "encryptedToken"}``, the token's
HMAC keyed with the secret that verified the request, and not stored.

Zoom sends no delivery id. An event is stored under
``{event}:{event_ts}:{payload.object uuid or id}``: a retry re-sends the same body, so
the same key; the object part keeps apart two events of one type in the same
millisecond. Events whose payload has no object use ``{event}:{event_ts}``.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import (
    NOT_JSON,
    Delivery,
    HandshakeResponse,
    IncomingEvent,
    Provider,
    any_digest_matches,
    check_timestamp,
    hmac_hex,
    json_object,
    require_header,
    require_secrets,
    unix_time,
    unix_timestamp,
)

PREFIX = "v0="
URL_VALIDATION = "endpoint.url_validation"


def _signature(secret: str, timestamp: str, body: bytes) -> str:
    message = b"v0:" + timestamp.encode() + b":" + body
    return PREFIX + hmac_hex(secret, message)


class ZoomProvider(Provider):
    name = "zoom"
    # Zoom retries three times, the last about 85 minutes after the first attempt.
    retry_window = timedelta(days=1)
    # Zoom documents no tolerance; five minutes, as Slack's identical scheme uses.
    tolerance = timedelta(minutes=5)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature, timestamp = self._signature_headers(delivery)
        require_secrets(secrets)
        expected = [_signature(s, timestamp, delivery.body) for s in secrets]
        if not any_digest_matches(expected, [signature]):
            raise VerificationError("the signature matches no active secret")
        check_timestamp(int(timestamp), now=now, tolerance=self.tolerance)

    @staticmethod
    def _signature_headers(delivery: Delivery) -> tuple[str, str]:
        signature = require_header(delivery, "x-zm-signature")
        timestamp = require_header(delivery, "x-zm-request-timestamp")
        if not signature.startswith(PREFIX):
            raise MalformedRequest("x-zm-signature must start with v0=", reason="malformed_header")
        if unix_timestamp(timestamp) is None:
            raise MalformedRequest(
                "x-zm-request-timestamp must be a unix time", reason="malformed_header"
            )
        return signature, timestamp

    def handshake(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        try:
            payload = json.loads(delivery.body)
        except NOT_JSON:
            return None  # parse refuses it
        if not isinstance(payload, dict) or payload.get("event") != URL_VALIDATION:
            return None
        inner = payload.get("payload")
        plain = inner.get("plainToken") if isinstance(inner, dict) else None
        if not isinstance(plain, str) or not plain:
            raise MalformedRequest(
                "endpoint.url_validation needs payload.plainToken", reason="malformed_body"
            )
        secret = self._verifying_secret(delivery, secrets)
        encrypted = hmac_hex(secret, plain.encode())
        return HandshakeResponse(
            json.dumps({"plainToken": plain, "encryptedToken": encrypted}).encode()
        )

    def _verifying_secret(self, delivery: Delivery, secrets: Sequence[str]) -> str:
        """The secret that verified this request: during a rotation Zoom holds only one."""
        signature, timestamp = self._signature_headers(delivery)
        for secret in secrets:
            if hmac.compare_digest(_signature(secret, timestamp, delivery.body), signature):
                return secret
        raise VerificationError("the signature matches no active secret")

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event, event_ts = payload.get("event"), payload.get("event_ts")
        if not isinstance(event, str) or not event or not isinstance(event_ts, int):
            raise MalformedRequest(
                "a Zoom event needs a string event and an integer event_ts",
                reason="malformed_body",
            )
        key = f"{event}:{event_ts}"
        subject = _object_key(payload.get("payload"))
        if subject is not None:
            key += f":{subject}"
        occurred_at = unix_time(event_ts, milliseconds=True)
        return [IncomingEvent(external_id=key, type=event, occurred_at=occurred_at, id_signed=True)]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        timestamp = str(int(now.timestamp()))
        return {
            "x-zm-request-timestamp": timestamp,
            "x-zm-signature": _signature(secret, timestamp, delivery.body),
        }

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp() * 1000)
        payload = {
            "event": "meeting.started",
            "event_ts": stamp,
            "payload": {
                "account_id": "demo-account",
                "object": {
                    "id": "85746065432",
                    "uuid": f"demo{stamp}==",
                    "host_id": "demo-host",
                    "topic": "hooklatch demo",
                    "type": 2,
                    "start_time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "timezone": "UTC",
                },
            },
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _object_key(payload: Any) -> str | None:
    """The event's object: its uuid (one per meeting instance), else its id."""
    subject = payload.get("object") if isinstance(payload, dict) else None
    if not isinstance(subject, dict):
        return None
    for field in ("uuid", "id"):
        value = subject.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return str(value)
    return None
