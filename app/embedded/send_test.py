"""Signed sample deliveries: what `hooklatch send-test` posts, as the provider would."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from hooklatch.providers.base import Provider
from hooklatch.providers.samples import signed_sample


def send_signed_sample(
    provider: Provider, url: str, *, secret: str, options: Mapping[str, str], now: datetime
) -> tuple[int, Any]:
    """POST the provider's sample event to ``url``, signed with ``secret``: the answer's
    status and JSON body. CannotSign, before anything is sent, where the provider's plugin
    cannot make one."""
    headers, body = signed_sample(provider, url, secret=secret, options=options, now=now)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
