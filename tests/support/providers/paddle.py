"""How Paddle Billing signs a test request, for the conformance kit and the tests.

Requests are signed by paddle-python-sdk's own PaddleSignature.calculate_hmac; the
SDK's fixture (body, header and secret) is kept here for the tests to check against.
"""

import json
from datetime import datetime

from paddle_billing.Notifications import PaddleSignature

from tests.support.providers import SignsWithEachSecret

# PaddleHQ/paddle-python-sdk tests/Unit/Notification/test_Verifier.py: the fixture
# standard_payload.json, its header and its secret.
FIXTURE_SECRET = "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_GrOWLNef+vmtjJYq4mSnHNzvc8uWoJ1I"
FIXTURE_HEADER = "ts=1710498758;h1=558bf93944dbeb4790c7a8af6cb2ea435c8ca9c8396aafc1a4e37424ac132744"
FIXTURE_BODY = (
    b'{"data":{"id":"ctm_01hs0tqf76sxmp7ba5e4mw1sc8","name":"John Doe",'
    b'"email":"blackhole+verification2@paddle.com","locale":"en",'
    b'"status":"active","created_at":"2024-03-15T10:32:37.862Z",'
    b'"updated_at":"2024-03-15T10:32:37.862Z","custom_data":null,'
    b'"import_meta":null,"marketing_consent":false},'
    b'"event_id":"evt_01hs0tqfme2xwb2hvwv87p8y3w",'
    b'"event_type":"customer.created",'
    b'"occurred_at":"2024-03-15T10:32:38.286848Z",'
    b'"notification_id":"ntf_01hs0tqfrhgkyp39x4wyvy7h6n"}'
)


def paddle_header(body: bytes, *, secrets, now: datetime) -> str:
    timestamp = int(now.timestamp())
    message = f"{timestamp}:".encode() + body
    entries = [PaddleSignature.calculate_hmac(s, message).hexdigest() for s in secrets]
    return ";".join([f"ts={timestamp}", *(f"h1={entry}" for entry in entries)])


class PaddleCase(SignsWithEachSecret):
    provider = "paddle"
    secret, other_secret = (
        "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_conformanceOldSecret+x/y",
        "pdl_ntfset_01hs0t3tw21j988db1pam5xg8m_conformanceNewSecret+x/y",
    )
    signature_headers = ("Paddle-Signature",)
    signs_timestamp = True

    def sign_several(self, body, *, secrets, now, url):
        return {"Paddle-Signature": paddle_header(body, secrets=secrets, now=now)}

    def event_body(self, event_id, *, note="hello"):
        payload = {
            "event_id": event_id,
            "event_type": "transaction.completed",
            "occurred_at": "2026-11-21T10:00:00.123456Z",
            "notification_id": "ntf_01hs0tqfrhgkyp39x4wyvy7h6n",
            "data": {"id": "txn_1", "status": "completed", "custom_data": {"note": note}},
        }
        return json.dumps(payload, ensure_ascii=False).encode()
