"""How Linear signs a test request, for the conformance kit and the tests. Linear publishes
no signer for Python (its SDK only verifies), so requests are signed as its SDK's own tests
do: HMAC-SHA256 of the raw body, hex, with the standard library."""

import hashlib
import hmac
import json
from datetime import datetime

from hooklatch.testing import ProviderConformance

WEBHOOK_ID = "5c2a8a8e-6a1b-4f6e-9c55-3f0b2f2e9d11"
CREATED_AT = "2026-11-21T10:00:00.000Z"


def linear_signature(secret: str, body: bytes) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def issue_event(
    entity_id: str, *, title="hello", sent_at: datetime | None = None, **extra
) -> bytes:
    payload = {
        "action": "create",
        "type": "Issue",
        "createdAt": CREATED_AT,
        "data": {"id": entity_id, "title": title},
        "url": f"https://linear.app/acme/issue/{entity_id}",
        "organizationId": "org-1",
        "webhookId": WEBHOOK_ID,
        **extra,
    }
    if sent_at is not None:
        payload["webhookTimestamp"] = ms(sent_at)
    return json.dumps(payload, ensure_ascii=False).encode()


class LinearCase(ProviderConformance):
    """The kit signs a body it built beforehand, so its time goes in the Linear-Timestamp
    header (what Linear's SDK falls back to); the body's own webhookTimestamp is tested in
    tests/integration/providers/test_linear.py."""

    provider = "linear"
    secret, other_secret = "lin_wh_conformance_old", "lin_wh_conformance_new"
    signature_headers = ("Linear-Signature",)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return {
            "Linear-Signature": linear_signature(secret, body),
            "Linear-Timestamp": str(ms(now)),
            "Linear-Event": "Issue",
        }

    def event_body(self, event_id, *, note="hello"):
        return issue_event(event_id, title=note)

    def expected_ids(self, event_id):
        return (f"{WEBHOOK_ID}:Issue:create:{event_id}:{CREATED_AT}",)
