"""Meta (Facebook Pages, Messenger, Instagram, WhatsApp Cloud API).

Deliveries: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256(app secret, raw body)>``. Meta
signs unicode-escaped JSON, so only the bytes received verify.

Subscription handshake: ``GET ?hub.mode=subscribe&hub.verify_token=<t>&hub.challenge=<c>``
is answered 200 ``text/plain`` with exactly ``<c>`` when ``<t>`` is the endpoint's
``verify_token`` option (chosen by you, stored encrypted), and 403 otherwise.

Meta sends no delivery id and batches several entries, changes and messages into one
request, so one request may yield several events. Each gets:

- WhatsApp ``changes[].value.messages[]``: the message id (``wamid...``);
  ``value.statuses[]``: the message id and the status (``wamid...:delivered``), since each
  message goes through several statuses;
- Messenger and Instagram ``messaging[]`` items carrying a message: its ``mid``;
- anything else (a Page feed change, a delivery or read receipt, a reaction...):
  ``<entry id>:<entry time>:<field>:<digest of the item>``. Entry id and time alone
  would merge two changes made in the same second; the digest of the item's own content
  keeps them apart and is the same when Meta re-sends it, however it batches the retry.

Type: ``<object>.<field>``: ``whatsapp_business_account.messages``, ``page.feed``,
``instagram.comments``. ``messaging[]`` items have no field; theirs is named from what the
item carries as Meta names the subscription: ``page.messages``, ``page.message_echoes``,
``page.messaging_postbacks``, ``page.message_reads``...
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from hooklatch.errors import Forbidden, MalformedRequest
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import (
    Delivery,
    HandshakeResponse,
    IncomingEvent,
    Provider,
    require_header,
)
from hooklatch.providers.parsing import json_digest, json_object, unix_time
from hooklatch.providers.signing import any_digest_matches, check_signatures, hmac_hex

SIGNATURE = "X-Hub-Signature-256"
PREFIX = "sha256="
TOKEN_OPTION = "verify_token"  # noqa: S105  (an option name, not a secret)

# What a messaging[] item carries -> the webhook field it belongs to.
MESSAGING_FIELDS = (
    ("message", "messages"),
    ("postback", "messaging_postbacks"),
    ("delivery", "message_deliveries"),
    ("read", "message_reads"),
    ("reaction", "message_reactions"),
    ("optin", "messaging_optins"),
    ("referral", "messaging_referrals"),
    ("account_linking", "messaging_account_linking"),
)


def _signature(secret: str, body: bytes) -> str:
    return PREFIX + hmac_hex(secret, body)


def _digest(item: JSON) -> str:
    return json_digest(item)[:32]


def _when(value: JSON) -> datetime | None:
    """Meta's times: unix seconds, or milliseconds in Messenger; numbers or strings."""
    if not isinstance(value, str | int | float):
        return None
    try:
        number = int(value)
    except (ValueError, OverflowError):  # not a number, NaN, infinity
        return None
    return unix_time(number, milliseconds=number > 10**11)


class MetaProvider(Provider):
    name = "meta"
    # The WhatsApp Cloud API re-delivers a failed webhook for up to seven days.
    retry_window = timedelta(days=7)
    options = {
        TOKEN_OPTION: "the token you enter as 'Verify token' in the app's Webhooks settings "
        "(required); Meta's subscription GET must present it"
    }
    secret_options = frozenset({TOKEN_OPTION})

    def check_options(self, options: Mapping[str, str]) -> dict[str, str]:
        checked = super().check_options(options)
        if not checked.get(TOKEN_OPTION, "").strip():
            raise ValueError(
                f"meta needs the option {TOKEN_OPTION!r}: the token Meta's subscription "
                "request must present (any string you choose)"
            )
        return checked

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = require_header(delivery, SIGNATURE, prefix=PREFIX)
        check_signatures(
            [signature.lower()],
            secrets=secrets,
            sign=lambda secret: _signature(secret, delivery.body),
            refusal="the signature matches no active app secret",
        )

    def challenge(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        query = delivery.query
        if not any(key.startswith("hub.") for key in query):
            return None  # not a handshake: the GET is refused as any other
        expected = delivery.options.get(TOKEN_OPTION, "")
        token = query.get("hub.verify_token", "")
        matches = bool(expected) and any_digest_matches([expected], [token])
        if query.get("hub.mode") != "subscribe" or not matches:
            raise Forbidden(
                "hub.mode is not subscribe or hub.verify_token is not the endpoint's",
                reason="bad_verify_token",
            )
        challenge = query.get("hub.challenge")
        if not challenge:
            raise MalformedRequest("hub.challenge is missing", reason="malformed_query")
        return HandshakeResponse(challenge.encode(), content_type="text/plain")

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        kind, entries = payload.get("object"), payload.get("entry")
        if not isinstance(kind, str) or not kind or not isinstance(entries, list) or not entries:
            raise MalformedRequest(
                "a Meta delivery needs an object and a non-empty entry list",
                reason="malformed_body",
            )
        events: list[IncomingEvent] = []
        for entry in entries:
            if not isinstance(entry, dict):
                raise MalformedRequest("each entry must be an object", reason="malformed_body")
            events.extend(self._entry_events(kind, entry))
        # Every id is read from (or is a digest of) the body, which the signature covers.
        return [replace(event, id_signed=True) for event in events]

    def _entry_events(self, kind: str, entry: JSONObject) -> list[IncomingEvent]:
        where = f"{entry.get('id', '')}:{entry.get('time', '')}"
        events: list[IncomingEvent] = []
        for change in _objects(entry.get("changes")):
            field = str(change.get("field") or "changes")
            events.extend(self._change_events(kind, field, change, entry))
        for item in _objects(entry.get("messaging")):
            field = next((name for key, name in MESSAGING_FIELDS if key in item), "messaging")
            message = item.get("message")
            if isinstance(message, dict) and message.get("is_echo"):
                field = "message_echoes"
            mid = message.get("mid") if isinstance(message, dict) else None
            key = mid if isinstance(mid, str) and mid else f"{where}:{field}:{_digest(item)}"
            events.append(IncomingEvent(key, f"{kind}.{field}", _when(item.get("timestamp"))))
        if not events:  # neither changes nor messaging: the entry is the event
            events.append(
                IncomingEvent(f"{where}:{_digest(entry)}", kind, _when(entry.get("time")))
            )
        return events

    @staticmethod
    def _change_events(
        kind: str, field: str, change: JSONObject, entry: JSONObject
    ) -> list[IncomingEvent]:
        event_type = f"{kind}.{field}"
        value = change.get("value")
        fields = value if isinstance(value, dict) else {}
        events = []
        for message in _objects(fields.get("messages")):
            message_id = message.get("id")
            if isinstance(message_id, str) and message_id:
                when = _when(message.get("timestamp"))
                events.append(IncomingEvent(message_id, event_type, when))
        for status in _objects(fields.get("statuses")):
            status_id = status.get("id")
            if isinstance(status_id, str) and status_id:
                key = f"{status_id}:{status.get('status', '')}"
                events.append(IncomingEvent(key, event_type, _when(status.get("timestamp"))))
        if not events:
            key = f"{entry.get('id', '')}:{entry.get('time', '')}:{field}:{_digest(change)}"
            events.append(IncomingEvent(key, event_type, _when(entry.get("time"))))
        return events

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {SIGNATURE: _signature(secret, delivery.body)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        message = {
            "from": "15550000001",
            "id": f"wamid.demo{stamp}",
            "timestamp": str(stamp),
            "type": "text",
            "text": {"body": "hello from hooklatch"},
        }
        payload = {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102290129340398",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {"phone_number_id": "106540352242922"},
                                "messages": [message],
                            },
                        }
                    ],
                }
            ],
        }
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _objects(value: JSON) -> list[JSONObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
