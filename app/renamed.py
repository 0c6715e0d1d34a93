"""Imports and settings of earlier versions, and what to write instead.

hooklatch used to install its code as the top-level packages ``app``, ``workers`` and
``migrations``. Handlers and plugins written then fail to import now; the process that
loads them names the import to write instead of showing a bare ImportError. A setting
that is no longer read stops every process at start (hooklatch.settings), naming what
replaced it, rather than being ignored.
"""

from __future__ import annotations

import importlib
import linecache
import re
import traceback

# Old module -> the public module that replaces it. Anything else under the old names
# is internal: it lives on under hooklatch, but may move.
PUBLIC = {
    "app": "hooklatch",
    "app.handlers": "hooklatch",
    "app.providers": "hooklatch.providers",
    "app.providers.base": "hooklatch.providers",
    "app.errors": "hooklatch.providers",
    "app.conformance": "hooklatch.testing",
}
# Settings no longer read -> what to set instead.
SETTINGS = {
    "HOOKLATCH_METRICS_PORT": (
        "set HOOKLATCH_RELAY_METRICS_PORT for relays and HOOKLATCH_WORKER_METRICS_PORT for "
        "workers (a port each, so that one environment serves both on one host)"
    ),
}
_IMPORT = re.compile(
    r"^\s*(?:from\s+(?P<from>[\w.]+)\s+import\s+(?P<names>.+)|import\s+(?P<module>[\w.]+))"
)


def new_module(old: str) -> str | None:
    """What replaces ``old``, if it is one of hooklatch's old module names."""
    if old in PUBLIC:
        return PUBLIC[old]
    root, _, rest = old.partition(".")
    if root == "app" and rest:
        return f"hooklatch.{rest}"
    if root in ("workers", "migrations"):
        return f"hooklatch.{old}"
    return None


def hint(exc: BaseException) -> str:
    """For an ImportError raised by an old import: ' (write `...` instead of `...`)'.
    Empty for any other error."""
    if not isinstance(exc, ImportError):
        return ""
    statement = _failing_statement(exc)
    match = _IMPORT.match(statement or "")
    if match is None:
        return ""
    old = match.group("from") or match.group("module")
    new = new_module(old)
    names = _names(match.group("names") or "")
    # Only where the new import really works: an import of the user's own module of
    # the same name that failed for its own reasons gets no advice.
    if new is None or not _importable(new, names):
        return ""
    if match.group("from"):
        rewritten = f"from {new} import {', '.join(names) or '...'}"
    else:
        rewritten = f"import {new}"
    return (
        f" (hooklatch is imported as `hooklatch` now: write `{rewritten}` instead of "
        f"`{statement.strip() if statement else old}`)"
    )


def _names(text: str) -> list[str]:
    """`a, b as c` -> ['a', 'b as c']; a line that goes on in parentheses gives []."""
    text = text.split("#", 1)[0].strip()
    if text.startswith("(") or text.endswith(("(", "\\")):
        return []
    return [name.strip() for name in text.split(",") if name.strip()]


def _importable(module: str, names: list[str]) -> bool:
    try:
        found = importlib.import_module(module)
    except ImportError:
        return False
    return all(hasattr(found, name.split(" as ")[0].strip()) for name in names)


def _failing_statement(exc: BaseException) -> str | None:
    """The source line of the innermost frame outside the import machinery."""
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen")
    ]
    if not frames:
        return None
    frame = frames[-1]
    return frame.line or linecache.getline(frame.filename, frame.lineno or 0) or None
