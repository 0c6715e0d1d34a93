"""A failed delivery's reason, said without the URL: the clients' own messages often quote
it (requests names the path and query, which may hold a token), so the reason comes
from the system error at the bottom of the exception's chain."""

from __future__ import annotations

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
        if isinstance(current, OSError) and current.strerror and current.errno is not None:
            return current.strerror[:1].lower() + current.strerror[1:]
        pending.extend(_causes(current))
    return None


def _causes(error: BaseException) -> list[BaseException]:
    """What ``error`` wraps: its cause and context, urllib3's ``reason``, and exceptions
    passed as arguments (requests wraps urllib3's errors that way)."""
    reason = getattr(error, "reason", None)
    linked = [error.__cause__, error.__context__, reason, *error.args]
    return [e for e in linked if isinstance(e, BaseException)]
