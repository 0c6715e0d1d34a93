"""Linear: ``Linear-Signature: <hex HMAC-SHA256 of the raw body>``; the time is in the body.

The body's ``webhookTimestamp`` (unix milliseconds) is covered by the signature, so it is
what the 60-second window (Linear's SDK's) is checked against. Only where the body has
none is the ``Linear-Timestamp`` header used, as Linear's SDK does; that header is not
signed, so it proves nothing about when the body was sent.

Dedupe key: ``webhookTimestamp`` is when an attempt was sent (it must be: a retry with the
first attempt's time would fail Linear's own 60-second check), so the key is made of what
stays the same on every attempt of one event,
``{webhookId}:{type}:{action}:{data.id}:{createdAt}``: the webhook, what happened, to which
entity and when it happened. ``Linear-Delivery`` is used only for a body without those
fields: whether Linear keeps it across retries is not documented.
Event type: ``{type}.{action}`` ("Issue.create").

Ordering key: the entity's id, ``data.id``. Position: the entity's ``data.updatedAt``, else
the event's ``createdAt`` (its occurred_at), else ``webhookTimestamp``. The attempt's time
comes last: a retry of an old event carries a new one, and would pass for newer.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from hooklatch.errors import MalformedRequest
from hooklatch.jsontypes import JSONObject
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.keys import KeyedEvent, dotted, key_text, position_of
from hooklatch.providers.parsing import json_object, occurred_at, unix_time, unix_timestamp
from hooklatch.providers.signing import check_signatures, check_timestamp, hmac_hex

HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")


class LinearProvider(Provider):
    name = "linear"
    # Linear retries a failed delivery a few times with a backoff spread over hours; its
    # exact schedule is not something to rely on, so keep days of margin.
    retry_window = timedelta(days=3)
    tolerance = timedelta(seconds=60)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = require_header(delivery, "Linear-Signature")
        if not HEX_SHA256.fullmatch(signature):
            raise MalformedRequest(
                "Linear-Signature must be a hex HMAC-SHA256", reason="malformed_header"
            )
        check_signatures(
            [signature.lower()],
            secrets=secrets,
            sign=lambda secret: hmac_hex(secret, delivery.body),
        )
        check_timestamp(self._sent_at_ms(delivery) // 1000, now=now, tolerance=self.tolerance)

    @staticmethod
    def _sent_at_ms(delivery: Delivery) -> int:
        stamp = json_object(delivery.body).get("webhookTimestamp")
        if stamp is None:
            header = delivery.header("Linear-Timestamp")
            if not header:
                raise MalformedRequest(
                    "no webhookTimestamp in the body and no Linear-Timestamp header",
                    reason="missing_header",
                )
            sent_at = unix_timestamp(header)
            if sent_at is None:
                raise MalformedRequest(
                    "Linear-Timestamp must be unix milliseconds", reason="malformed_header"
                )
            return sent_at
        # Not NaN, infinity or a number no clock reaches (unix milliseconds, 15 digits).
        if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not 0 <= stamp < 1e15:
            raise MalformedRequest(
                "webhookTimestamp must be unix milliseconds", reason="malformed_body"
            )
        return int(stamp)

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        payload = json_object(delivery.body)
        kind = payload.get("type") or delivery.header("Linear-Event")
        if not isinstance(kind, str) or not kind:
            raise MalformedRequest("a Linear delivery needs a string type", reason="malformed_body")
        action = payload.get("action")
        event_type = f"{kind}.{action}" if isinstance(action, str) and action else kind
        external_id, signed = self._dedupe_key(delivery, payload)
        return [
            IncomingEvent(
                external_id=external_id,
                type=event_type,
                occurred_at=occurred_at(payload.get("createdAt")),
                id_signed=signed,
            )
        ]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        return key_text(dotted(event.payload, "data.id"))

    def ordering_position(self, event: KeyedEvent) -> int | None:
        updated_at = occurred_at(dotted(event.payload, "data.updatedAt"))
        sent_at = unix_time(dotted(event.payload, "webhookTimestamp"), milliseconds=True)
        return position_of(updated_at or event.occurred_at or sent_at)

    @staticmethod
    def _dedupe_key(delivery: Delivery, payload: JSONObject) -> tuple[str, bool]:
        """The key from the signed body's fields, else the Linear-Delivery header (not
        signed); and whether it is signed."""
        webhook, kind, action, when = (
            payload.get(key) for key in ("webhookId", "type", "action", "createdAt")
        )
        data = payload.get("data")
        entity = data.get("id", "") if isinstance(data, dict) else ""
        parts = (webhook, kind, action, entity, when)
        if all(isinstance(part, str) for part in parts) and webhook and kind and action and when:
            return ":".join(str(part) for part in parts), True
        delivery_id = delivery.header("Linear-Delivery")
        if delivery_id:
            return delivery_id, False
        raise MalformedRequest(
            "a Linear delivery needs webhookId, type, action and createdAt, or a "
            "Linear-Delivery header",
            reason="malformed_body",
        )

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {
            "Linear-Signature": hmac_hex(secret, delivery.body),
            "Linear-Timestamp": str(int(now.timestamp() * 1000)),
        }

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp() * 1000)
        created = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        payload = {
            "action": "create",
            "type": "Issue",
            "createdAt": created,
            "data": {"id": str(uuid.uuid4()), "identifier": "ENG-1", "title": "Demo issue"},
            "url": "https://linear.app/demo/issue/ENG-1",
            "organizationId": str(uuid.uuid4()),
            "webhookId": str(uuid.uuid4()),
            "webhookTimestamp": stamp,
        }
        headers = {
            "Content-Type": "application/json",
            "Linear-Event": "Issue",
            "Linear-Delivery": str(uuid.uuid4()),
        }
        return headers, json.dumps(payload).encode()
