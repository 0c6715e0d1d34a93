"""How SendGrid signs a test request, for the conformance kit and the tests.

SendGrid keeps its private key, so tests sign with P-256 keys of their own (cryptography)
and the endpoint holds the public half, as it holds SendGrid's; the sendgrid SDK's
vector (test/unit/test_eventwebhook.py) is kept here for the tests to check against.
"""

import base64
import json

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from hooklatch.testing import ProviderConformance

SIGNATURE = "X-Twilio-Email-Event-Webhook-Signature"
TIMESTAMP = "X-Twilio-Email-Event-Webhook-Timestamp"


def public_key_text(private_key, encoding=serialization.Encoding.DER):
    """The public key as SendGrid's console shows it: base64 DER SubjectPublicKeyInfo."""
    blob = private_key.public_key().public_bytes(
        encoding, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return (
        blob.decode() if encoding == serialization.Encoding.PEM else base64.b64encode(blob).decode()
    )


KEYS = [ec.derive_private_key(n, ec.SECP256R1()) for n in (0x5E4D6121, 0x5E4D6122)]
PRIVATE = {public_key_text(key): key for key in KEYS}
OLD, NEW = PRIVATE


def sendgrid_headers(private_key, body, timestamp):
    signature = private_key.sign(str(timestamp).encode() + body, ec.ECDSA(hashes.SHA256()))
    return {SIGNATURE: base64.b64encode(signature).decode(), TIMESTAMP: str(timestamp)}


def batch(*events):
    """A body as SendGrid posts it: one event per line, CRLF between, CRLF at the end."""
    lines = [json.dumps(event, ensure_ascii=False, separators=(",", ":")) for event in events]
    return ("[" + ",\r\n".join(lines) + "]\r\n").encode()


def event(sg_event_id, kind="delivered", **extra):
    return {
        "email": "someone@example.com",
        "event": kind,
        "sg_event_id": sg_event_id,
        "sg_message_id": "LRzXl_NHStOGhQ4kofSm_A.filter0001",
        "timestamp": 1763726400,
        **extra,
    }


class SendGridCase(ProviderConformance):
    provider = "sendgrid"
    # The endpoint holds public keys; tests sign with the private halves.
    secret, other_secret = OLD, NEW
    signature_headers = (SIGNATURE,)
    signs_timestamp = True

    def sign(self, body, *, secret, now, url):
        return sendgrid_headers(PRIVATE[secret], body, int(now.timestamp()))

    def event_body(self, event_id, *, note="hello"):
        return batch(event(event_id, category=[note]))


# -- sendgrid/sendgrid-python test/unit/test_eventwebhook.py --------------------------------

SDK_KEY = (
    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE83T4O/n84iotIvIW4mdBgQ/7dAfSmpqIM8kF9mN1flpVKS3GRq"
    "e62gw+2fNNRaINXvVpiglSI8eNEc6wEA3F+g=="
)
SDK_SIGNATURE = (
    "MEUCIGHQVtGj+Y3LkG9fLcxf3qfI10QysgDWmMOVmxG0u6ZUAiEAyBiXDWzM+uOe5W0JuG+luQAbPIqHh89M"
    "15TluLtEZtM="
)
SDK_TIMESTAMP = 1600112502
SDK_PAYLOAD = (
    json.dumps(
        [
            {
                "email": "hello@world.com",
                "event": "dropped",
                "reason": "Bounced Address",
                "sg_event_id": "ZHJvcC0xMDk5NDkxOS1MUnpYbF9OSFN0T0doUTRrb2ZTbV9BLTA",
                "sg_message_id": (
                    "LRzXl_NHStOGhQ4kofSm_A.filterdrecv-p3mdw1-756b745b58-kmzbl-18-5F5FC76C-9.0"
                ),
                "smtp-id": "<LRzXl_NHStOGhQ4kofSm_A@ismtpd0039p1iad1.sendgrid.net>",
                "timestamp": 1600112492,
            }
        ],
        sort_keys=True,
        separators=(",", ":"),
    )
    + "\r\n"
).encode()
