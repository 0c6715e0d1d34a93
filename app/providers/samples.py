"""Test deliveries a provider makes itself: its ``sample_event``, signed by its ``sign``.

`hooklatch send-test` posts one; the conformance kit's ``python -m hooklatch.testing``
checks a provider with them when it is given no description of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from hooklatch.errors import HooklatchError
from hooklatch.providers.base import Delivery, Provider

ADVICE = (
    '(docs/plugins.md, "Test deliveries"). Send a test from the sender\'s own dashboard instead.'
)


class CannotSign(HooklatchError):
    """The provider cannot make a signed test delivery: its plugin lacks a hook for it."""

    status_code = 400
    reason = "cannot_sign"


def signed_sample(
    provider: Provider, url: str, *, secret: str, options: Mapping[str, str], now: datetime
) -> tuple[dict[str, str], bytes]:
    """The provider's sample event and the headers that sign it with ``secret`` for
    ``url``; CannotSign where the plugin does not implement ``sample_event`` or ``sign``."""
    try:
        headers, body = provider.sample_event(now=now)
    except NotImplementedError as exc:
        raise cannot_sign(provider, "sample_event()") from exc
    lowered = {name.lower(): value for name, value in headers.items()}
    delivery = Delivery("POST", url, lowered, body, dict(options))
    try:
        signed = provider.sign(delivery, secret=secret, now=now)
    except NotImplementedError as exc:
        raise cannot_sign(provider, "sign()") from exc
    return {**headers, **signed}, body


def cannot_sign(provider: Provider, hook: str) -> CannotSign:
    return CannotSign(
        f"provider {provider.name!r} cannot sign test requests: its plugin does not "
        f"implement {hook} {ADVICE}"
    )
