"""How Zoom signs a test request, for the conformance kit and the tests.

Zoom publishes no signer, in Python or elsewhere: requests are signed with the
standard library as Zoom documents the scheme (``v0:{timestamp}:{body}``).
"""

import hashlib
import hmac
import json
from datetime import UTC, datetime

from hooklatch.testing import ProviderConformance
from tests.support.providers import without_content_type

SECRET = "zoom-secret-token"
EVENT_TS = 1700000000123


def zoom_headers(body: bytes, secret: str, *, now: datetime | None = None):
    timestamp = str(int((now or datetime.now(UTC)).timestamp()))
    message = f"v0:{timestamp}:".encode() + body
    return {
        "Content-Type": "application/json",
        "x-zm-request-timestamp": timestamp,
        "x-zm-signature": "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest(),
    }


def meeting_started(uuid: str, *, topic: str = "hello", event_ts: int = EVENT_TS) -> bytes:
    payload = {
        "event": "meeting.started",
        "event_ts": event_ts,
        "payload": {
            "account_id": "AAAAAABBBB",
            "object": {"id": "85746065432", "uuid": uuid, "topic": topic, "type": 2},
        },
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def url_validation(plain_token: str) -> bytes:
    payload = {
        "event": "endpoint.url_validation",
        "event_ts": EVENT_TS,
        "payload": {"plainToken": plain_token},
    }
    return json.dumps(payload).encode()


def encrypted(secret: str, plain_token: str) -> str:
    return hmac.new(secret.encode(), plain_token.encode(), hashlib.sha256).hexdigest()


class ZoomCase(ProviderConformance):
    provider = "zoom"
    secret, other_secret = "zoom-conformance-old", "zoom-conformance-new"
    signature_headers = ("x-zm-signature",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return without_content_type(zoom_headers(body, secret, now=now))

    def event_body(self, event_id, *, note="hello"):
        return meeting_started(event_id, topic=note)

    def expected_ids(self, event_id):
        return (f"meeting.started:{EVENT_TS}:{event_id}",)
