"""Signed sample deliveries: `hooklatch send-test` and the demo."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from app.endpoints.service import endpoint_url, get_endpoint
from app.providers.base import Delivery
from app.runtime import Runtime


def send_signed_sample(
    runtime: Runtime, endpoint_ref: str, *, base_url: str | None = None
) -> tuple[int, Any]:
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        secret = runtime.box.decrypt(endpoint.secrets[-1].ciphertext)
        url = endpoint_url(base_url or runtime.settings.public_url, endpoint)
        provider = runtime.provider(endpoint.provider)
    now = runtime.clock()
    headers, body = provider.sample_event(now=now)
    options = dict(endpoint.options or {})
    delivery = Delivery("POST", url, {k.lower(): v for k, v in headers.items()}, body, options)
    headers.update(provider.sign(delivery, secret=secret, now=now))
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
