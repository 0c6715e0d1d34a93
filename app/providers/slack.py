"""Slack: ``X-Slack-Signature: v0=<hex>``, HMAC-SHA256 over ``v0:{timestamp}:{body}``.

One scheme signs the three kinds of request an app receives:

- Events API: a JSON envelope. ``event_callback`` is stored under its ``event_id``
  (Slack re-sends the same id) and typed by the inner ``event.type``;
  ``app_rate_limited`` under ``app_rate_limited:{api_app_id}:{minute_rate_limited}``.
  ``url_verification`` is answered with its challenge and not stored.
- Slash commands: a form body, stored under its ``trigger_id`` (one per invocation)
  and typed by its ``command``.
- Interactivity: a form body with the JSON in ``payload``, stored under its
  ``trigger_id`` and typed by its ``type``; ``view_closed``, which has no trigger id,
  under ``view_closed:{view.id}`` (a view closes once). Payloads that carry neither
  (``block_suggestion``) ask for an answer in the response and are refused.

A slash command's ``ssl_check=1`` is answered 200 and not stored (after verifying).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from urllib.parse import parse_qs

from hooklatch.errors import MalformedRequest
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import Delivery, HandshakeResponse, IncomingEvent
from hooklatch.providers.parsing import NOT_JSON, json_object, load_json, unix_time
from hooklatch.providers.schemes import SchemeProvider, V0Signature

FORM = "application/x-www-form-urlencoded"


class SlackProvider(SchemeProvider):
    name = "slack"
    # Slack retries three times within about five minutes; a day leaves room.
    retry_window = timedelta(days=1)
    tolerance = timedelta(minutes=5)
    scheme = V0Signature("X-Slack-Signature", timestamp_header="X-Slack-Request-Timestamp")

    def handshake(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        if _is_form(delivery.headers):
            fields = _form(delivery.body)
            if fields.get("ssl_check") == "1":
                return HandshakeResponse(b"", content_type="text/plain")
            return None
        try:
            payload = json.loads(delivery.body)
        except NOT_JSON:
            return None  # parse refuses it
        if not isinstance(payload, dict) or payload.get("type") != "url_verification":
            return None
        challenge = payload.get("challenge")
        if not isinstance(challenge, str) or not challenge:
            raise MalformedRequest(
                "url_verification needs a string challenge", reason="malformed_body"
            )
        return HandshakeResponse(json.dumps({"challenge": challenge}).encode())

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        if not _is_form(delivery.headers):
            return [_envelope(json_object(delivery.body))]
        fields = _form(delivery.body)
        if "payload" in fields:
            return [_interaction(json_object(fields["payload"].encode()))]
        command, trigger_id = fields.get("command"), fields.get("trigger_id")
        if not command or not trigger_id:
            raise MalformedRequest(
                "a form body needs payload, or command and trigger_id", reason="malformed_body"
            )
        return [IncomingEvent(external_id=trigger_id, type=command, id_signed=True)]

    def payload(self, headers: Mapping[str, str], body: bytes) -> JSON:
        """Events as sent; a slash command as a dict of its fields; an interaction as the
        JSON in its ``payload`` field."""
        try:
            if not _is_form(headers):
                return load_json(body)
            fields = _form(body)
            return load_json(fields["payload"]) if "payload" in fields else {**fields}
        except MalformedRequest:
            return None

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        payload = {
            "token": "demo-verification-token",
            "team_id": "T0DEMO",
            "api_app_id": "A0DEMO",
            "type": "event_callback",
            "event_id": f"Ev0DEMO{stamp}",
            "event_time": stamp,
            "event": {
                "type": "app_mention",
                "user": "U0DEMO",
                "text": "<@U0APP> hello",
                "ts": f"{stamp}.000100",
                "channel": "C0DEMO",
                "event_ts": f"{stamp}.000100",
            },
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _is_form(headers: Mapping[str, str]) -> bool:
    return headers.get("content-type", "").lower().startswith(FORM)


def _form(body: bytes) -> dict[str, str]:
    try:
        fields = parse_qs(body.decode(), keep_blank_values=True, strict_parsing=True)
    except (UnicodeDecodeError, ValueError):
        raise MalformedRequest("form body is malformed", reason="malformed_body") from None
    return {name: values[0] for name, values in fields.items()}


def _envelope(payload: JSONObject) -> IncomingEvent:
    kind = payload.get("type")
    if kind == "event_callback":
        event, event_id = payload.get("event"), payload.get("event_id")
        inner = event.get("type") if isinstance(event, dict) else None
        if not isinstance(event_id, str) or not event_id or not isinstance(inner, str):
            raise MalformedRequest(
                "an event_callback needs a string event_id and event.type",
                reason="malformed_body",
            )
        occurred_at = unix_time(payload.get("event_time"))
        return IncomingEvent(
            external_id=event_id, type=inner, occurred_at=occurred_at, id_signed=True
        )
    if kind == "app_rate_limited":
        app_id, minute = payload.get("api_app_id"), payload.get("minute_rate_limited")
        if isinstance(app_id, str) and isinstance(minute, int):
            return IncomingEvent(
                external_id=f"app_rate_limited:{app_id}:{minute}",
                type=kind,
                occurred_at=unix_time(minute),
                id_signed=True,
            )
    raise MalformedRequest(
        f"not a Slack event envelope this provider stores (type {kind!r})",
        reason="malformed_body",
    )


def _interaction(payload: JSONObject) -> IncomingEvent:
    kind, trigger_id = payload.get("type"), payload.get("trigger_id")
    if not isinstance(kind, str) or not kind:
        raise MalformedRequest("an interaction payload needs a type", reason="malformed_body")
    if isinstance(trigger_id, str) and trigger_id:
        return IncomingEvent(external_id=trigger_id, type=kind, id_signed=True)
    view = payload.get("view")
    view_id = view.get("id") if isinstance(view, dict) else None
    if kind == "view_closed" and isinstance(view_id, str) and view_id:
        return IncomingEvent(external_id=f"view_closed:{view_id}", type=kind, id_signed=True)
    raise MalformedRequest(
        f"a {kind} interaction has no trigger_id to deduplicate on", reason="malformed_body"
    )
