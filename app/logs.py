"""Structured logs: endpoint, event and job ids travel in contextvars onto every record."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "hooklatch_log_context", default=None
)


def one_line(exc: BaseException) -> str:
    """An exception for a log line: its type and the first line of its message. A
    database error's message goes on with the driver's hints, the statement and a link;
    the driver's own first line says what happened."""
    message = str(getattr(exc, "orig", None) or exc).strip()
    return f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}"


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    token = _context.set({**(_context.get() or {}), **fields})
    try:
        yield
    finally:
        _context.reset(token)


class ContextFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in (_context.get() or {}).items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class KeyValueFormatter(logging.Formatter):
    FIELDS = ("endpoint_id", "event_id", "external_id", "replay_id", "job_id", "reason")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extras = " ".join(
            f"{key}={getattr(record, key)}" for key in self.FIELDS if hasattr(record, key)
        )
        return f"{line} {extras}" if extras else line


def configure(level: str = "INFO") -> None:
    root = logging.getLogger()
    if any(isinstance(h.formatter, KeyValueFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(KeyValueFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(ContextFilter())
    root.addHandler(handler)
    root.setLevel(level)
