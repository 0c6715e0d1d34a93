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

import json
from collections.abc import Sequence
from datetime import datetime, timedelta

from hooklatch.errors import MalformedRequest
from hooklatch.jsontypes import JSON
from hooklatch.providers.base import Delivery, HandshakeResponse, IncomingEvent
from hooklatch.providers.parsing import NOT_JSON, json_object, unix_time
from hooklatch.providers.schemes import SchemeProvider, V0Signature
from hooklatch.providers.signing import hmac_hex

SIGNATURE = V0Signature("x-zm-signature", timestamp_header="x-zm-request-timestamp")
URL_VALIDATION = "endpoint.url_validation"


class ZoomProvider(SchemeProvider):
    name = "zoom"
    # Zoom retries three times, the last about 85 minutes after the first attempt.
    retry_window = timedelta(days=1)
    # Zoom documents no tolerance; five minutes, as Slack's identical scheme uses.
    tolerance = timedelta(minutes=5)
    scheme = SIGNATURE

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
        # Keyed with the secret that verified this request: during a rotation Zoom holds
        # only one.
        secret = SIGNATURE.verifying_secret(delivery, secrets)
        encrypted = hmac_hex(secret, plain.encode())
        return HandshakeResponse(
            json.dumps({"plainToken": plain, "encryptedToken": encrypted}).encode()
        )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        event, event_ts = payload.get("event"), payload.get("event_ts")
        if not isinstance(event, str) or not event or not isinstance(event_ts, int):
            raise MalformedRequest(
                "a Zoom event needs a string event and an integer event_ts",
                reason="malformed_body",
            )
        subject = _object_key(payload.get("payload"))
        key = f"{event}:{event_ts}" + (f":{subject}" if subject is not None else "")
        occurred_at = unix_time(event_ts, milliseconds=True)
        return [IncomingEvent(external_id=key, type=event, occurred_at=occurred_at, id_signed=True)]

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


def _object_key(payload: JSON) -> str | None:
    """The event's object: its uuid (one per meeting instance), else its id."""
    subject = payload.get("object") if isinstance(payload, dict) else None
    if not isinstance(subject, dict):
        return None
    for field in ("uuid", "id"):
        value = subject.get(field)
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            return str(value)
    return None
