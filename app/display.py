"""Text someone else chose (event types and ids, ordering keys, header values, handler
errors), as it is shown to a person in the console and the CLI.

A character that prints nothing of its own, or changes how the text around it prints,
is shown as its escape instead: controls (an escape sequence would act on a terminal),
format characters (a right-to-left override makes ``cus_1\\u202e2_suc`` read as another
key; zero-width spaces and joiners, direction marks and isolates, soft hyphens), line
and paragraph separators, and every space but the plain one. A backslash is shown
doubled, so that the text ``\\u202e`` and the character U+202E never look alike. What is
shown is only for reading: stored values, form fields, JSON answers and downloads keep
the text as it is.

Counts with their nouns (``counted``), times (``shown_time``) and ages (``shown_age``)
are written here too, the same way on every page and in every command.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime


def visible(text: str, *, keep: str = "") -> str:
    """``text`` with every character that is not printable (``str.isprintable``: the
    Unicode categories of controls, format characters, separators other than the plain
    space, private use, surrogates and unassigned code points) written as its Python
    escape (``\\x1b``, ``\\u202e``, ``\\n``), and a backslash as two. Characters in
    ``keep`` (a body's line breaks) are left as they are."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(c if c in keep or (c.isprintable() and c != "\\") else _escaped(c) for c in text)


def visible_json(text: str) -> str:
    """JSON text (as ``json.dumps`` writes it, ``ensure_ascii=False``) with every
    character that is not printable written as JSON's own escape, so that it still reads
    as the same JSON; its line breaks are the indentation's, and stay."""
    if text.isprintable():
        return text
    return "".join(
        c if c == "\n" or c.isprintable() else json.dumps(c, ensure_ascii=True)[1:-1] for c in text
    )


def _escaped(c: str) -> str:
    return "\\\\" if c == "\\" else c.encode("unicode_escape").decode()


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 event``, ``2 events``, ``0 events``: a count with its noun in the right number
    (``plural`` where adding an s is wrong: ``counted(n, "key", "keys")``)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def utc_time(moment: datetime | str) -> datetime:
    """A stored time (a datetime, or the ISO text an answer carries) in UTC; a time
    without a zone is taken as UTC, as the database stores them."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment)
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def shown_time(moment: datetime | str) -> str:
    """A time as a person reads it: ``2026-11-26 12:37:29 UTC``, to the second (cut, not
    rounded: never later than it was)."""
    return utc_time(moment).strftime("%Y-%m-%d %H:%M:%S UTC")


def shown_age(seconds: float) -> str:
    """How long, as a person reads it: ``42 s``, ``19.4 min``, ``3.0 h``, ``2.1 d``."""
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
