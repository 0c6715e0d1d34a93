"""A failed delivery's reason, said without the URL: the clients' own messages often quote
it (requests names the path and query, which may hold a token), so the reason comes
from the system error at the bottom of the exception's chain."""

from __future__ import annotations

import os
import ssl

from hooklatch.forwarding.kinds.base import Outcome


def failed(count: int, reason: str) -> list[Outcome]:
    """The outcome of each message of a call that failed as a whole."""
    return [Outcome(delivered=False, error=reason)] * count


def os_reason(error: BaseException) -> str | None:
    """The operating system's words for what went wrong ("connection refused", "name or
    service not known"), found in the chain under ``error``; None if there are none."""
    seen: set[int] = set()
    pending: list[BaseException] = [error]
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        words = _system_words(current)
        if words:
            return words[:1].lower() + words[1:]
        pending.extend(_causes(current))
    return None


def _system_words(error: BaseException) -> str | None:
    """An OSError's own text: the C library's for its errno (asyncio's strerror is "Connect
    call failed" and the address), OpenSSL's for a TLS error (whose errno is OpenSSL's),
    the resolver's for a host not found (a negative errno)."""
    if not isinstance(error, OSError) or error.errno is None:
        return None
    if error.errno > 0 and not isinstance(error, ssl.SSLError):
        return os.strerror(error.errno)
    return error.strerror or None


def _causes(error: BaseException) -> list[BaseException]:
    """What ``error`` wraps: its cause and context, urllib3's ``reason``, pika's
    ``exception``, and exceptions passed as arguments (requests wraps urllib3's that way)."""
    wrapped = [getattr(error, name, None) for name in ("reason", "exception")]
    linked = [error.__cause__, error.__context__, *wrapped, *error.args]
    return [e for e in linked if isinstance(e, BaseException)]
