"""Structured logs: endpoint, event and job ids travel in contextvars onto every record,
written as human-readable lines or, with HOOKLATCH_LOG_FORMAT=json, one JSON object each."""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pythonjsonlogger.json import JsonFormatter

from hooklatch.settings import SettingsError

FORMAT_VARIABLE = "HOOKLATCH_LOG_FORMAT"
FORMATS = ("text", "json")

_context: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "hooklatch_log_context", default=None
)


def one_line(exc: BaseException) -> str:
    """An exception for a log line: its type and the first line of its message. A
    database error's message goes on with the driver's hints, the statement and a link;
    the driver's own first line says what happened."""
    message = str(getattr(exc, "orig", None) or exc).strip()
    return f"{type(exc).__name__}: {message.splitlines()[0] if message else ''}"


class Outage:
    """One line when a background task (cleanup, heartbeat, gauges) starts failing and one
    when it works again; the failures in between at DEBUG. The process's own loop already
    logs one line per retry while the database or Redis is away (ARCHITECTURE: one clear
    line per retry), and its threads must not add theirs to each."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger = logger
        self.what = what
        self.failing = False

    def failed(self, exc: BaseException, retry_in: float) -> None:
        level = logging.DEBUG if self.failing else logging.WARNING
        self.logger.log(
            level, "%s failed (%s); retrying in %.1f s", self.what, one_line(exc), retry_in
        )
        self.failing = True

    def ok(self) -> None:
        if self.failing:
            self.logger.info("%s works again", self.what)
        self.failing = False


@contextmanager
def bind(**fields: object) -> Iterator[None]:
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


def chosen_format(environ: Mapping[str, str] | None = None) -> str:
    """HOOKLATCH_LOG_FORMAT: ``text`` (the default, for people) or ``json`` (one object a
    line, for a log pipeline)."""
    raw = ((os.environ if environ is None else environ).get(FORMAT_VARIABLE) or "text").strip()
    if raw.lower() not in FORMATS:
        raise SettingsError(f"{FORMAT_VARIABLE} must be text or json, got {raw!r}")
    return raw.lower()


def formatter(kind: str | None = None) -> logging.Formatter:
    if (kind or chosen_format()) == "json":
        # The bound ids (ContextFilter) and any `extra` become keys of their own.
        return JsonFormatter(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp=True,
        )
    return KeyValueFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")


def configure(level: str = "INFO") -> None:
    """One handler on the root logger, in the chosen format (once per process)."""
    root = logging.getLogger()
    if any(getattr(h, "hooklatch", False) for h in root.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(formatter())
    handler.addFilter(ContextFilter())
    handler.hooklatch = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    # Alembic says at INFO which plugins it set up and each step it runs; the commands
    # that migrate say in one line what changed.
    logging.getLogger("alembic").setLevel(logging.WARNING)
