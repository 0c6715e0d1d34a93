"""Requests signed by the providers' own SDKs, never by hooklatch's code."""

import base64
import hashlib
import hmac
import json
import time
import uuid
from datetime import datetime

import stripe
from githubkit.webhooks import sign as github_sign
from standardwebhooks import Webhook


def stripe_event(event_id=None, event_type="invoice.paid", **extra):
    payload = {
        "id": event_id or f"evt_{uuid.uuid4().hex[:24]}",
        "object": "event",
        "type": event_type,
        "created": int(time.time()),
        "data": {"object": {"id": "in_123", "amount_paid": 2000, "currency": "eur", **extra}},
    }
    return json.dumps(payload).encode()


def stripe_headers(body: bytes, secret: str, timestamp: int | None = None, extra_secrets=()):
    """Stripe-Signature as Stripe sends it, computed by stripe-python's own signer
    (the function its test-suite uses); one v1 per secret, as during a roll."""
    timestamp = int(time.time()) if timestamp is None else timestamp
    payload = f"{timestamp}.{body.decode()}"
    parts = [f"t={timestamp}"]
    for s in (secret, *extra_secrets):
        parts.append(f"v1={stripe.WebhookSignature._compute_signature(payload, s)}")
    return {"Stripe-Signature": ",".join(parts), "Content-Type": "application/json"}


def github_headers(body: bytes, secret: str, event="push", delivery=None):
    return {
        "X-Hub-Signature-256": github_sign(secret, body, method="sha256"),
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
    }


def whsec(seed: str) -> str:
    """A Standard Webhooks secret (whsec_ and base64 of 24 bytes), the same for one seed."""
    return "whsec_" + base64.b64encode(hashlib.sha256(seed.encode()).digest()[:24]).decode()


def standard_webhooks_v1(secret: str, message_id: str, now: datetime, body: bytes) -> str:
    """The v1 entry, made by the standardwebhooks package."""
    try:
        text = body.decode()
    except UnicodeDecodeError:
        # The package signs text only; the scheme is HMAC-SHA256 over the bytes.
        key = base64.b64decode(secret.removeprefix("whsec_"))
        content = f"{message_id}.{int(now.timestamp())}.".encode() + body
        return "v1," + base64.b64encode(hmac.new(key, content, hashlib.sha256).digest()).decode()
    return Webhook(secret).sign(message_id, now, text)
