"""GitHub: ``X-Hub-Signature-256: sha256=<hex>`` over the body; dedupe on X-GitHub-Delivery."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qs

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers.base import (
    NOT_JSON,
    Delivery,
    IncomingEvent,
    Provider,
    any_digest_matches,
    hmac_hex,
    json_object,
    require_header,
    require_secrets,
)

PREFIX = "sha256="


def _signature(secret: str, body: bytes) -> str:
    return PREFIX + hmac_hex(secret, body)


class GitHubProvider(Provider):
    name = "github"
    # GitHub does not retry; a person may redeliver for three days.
    retry_window = timedelta(days=3)
    generates_secret = True

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = require_header(delivery, "X-Hub-Signature-256")
        if not signature.startswith(PREFIX):
            raise MalformedRequest(
                "X-Hub-Signature-256 must start with sha256=", reason="malformed_header"
            )
        require_secrets(secrets)
        expected = [_signature(s, delivery.body) for s in secrets]
        if not any_digest_matches(expected, [signature]):
            raise VerificationError("the signature matches no active secret")

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        delivery_id = require_header(delivery, "X-GitHub-Delivery")
        event = require_header(delivery, "X-GitHub-Event")
        payload = json_object(self._json_bytes(delivery.headers, delivery.body))
        action = payload.get("action")
        event_type = f"{event}.{action}" if isinstance(action, str) and action else event
        return [IncomingEvent(external_id=delivery_id, type=event_type)]

    def payload(self, headers: Mapping[str, str], body: bytes) -> Any:
        try:
            return json.loads(self._json_bytes(headers, body))
        except (*NOT_JSON, MalformedRequest):
            return None

    @staticmethod
    def _json_bytes(headers: Mapping[str, str], body: bytes) -> bytes:
        """Hooks set to application/x-www-form-urlencoded send the JSON as ``payload=``."""
        content_type = headers.get("content-type", "")
        if not content_type.startswith("application/x-www-form-urlencoded"):
            return body
        try:
            fields = parse_qs(body.decode(), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise MalformedRequest("form body is malformed", reason="malformed_body") from None
        if "payload" not in fields:
            raise MalformedRequest("form body has no payload field", reason="malformed_body")
        return fields["payload"][0].encode()

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {"X-Hub-Signature-256": _signature(secret, delivery.body)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "zen": "Keep it logically awesome.",
            "hook_id": 1,
            "hook": {"type": "Repository"},
        }
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "ping",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "User-Agent": "GitHub-Hookshot/hooklatch-test",
        }
        return headers, json.dumps(payload).encode()
