"""Requests to a real server, timed, with about the patience a provider has."""

from __future__ import annotations

import time
from typing import Any

import requests

from tests.support.signing import stripe_event, stripe_headers

# Stripe and GitHub wait 10 s for an answer; a receiver that is not held up answers well
# within this.
PATIENCE = 5.0


def timed(method: str, url: str, **kwargs: Any) -> tuple[int | None, float]:
    """The answer's status (None: none within PATIENCE) and the seconds it took."""
    started = time.monotonic()
    try:
        status: int | None = requests.request(method, url, timeout=PATIENCE, **kwargs).status_code
    except requests.RequestException:
        status = None
    return status, time.monotonic() - started


def timed_delivery(url: str, external_id: str, secret: str) -> tuple[int | None, float]:
    """One Stripe-signed delivery, timed."""
    body = stripe_event(external_id)
    return timed("POST", url, data=body, headers=stripe_headers(body, secret))
