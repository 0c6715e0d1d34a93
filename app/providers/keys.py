"""What a provider's ``ordering_key`` and ``ordering_position`` read and give
(docs/plugins.md, "Ordering keys"): the event they are given, a path into its payload, an
id as a key, a time as a position. Importable from ``hooklatch.providers.base`` too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Protocol

from hooklatch.errors import storable
from hooklatch.jsontypes import JSON


class KeyedEvent(Protocol):
    """What ``ordering_key`` and ``ordering_position`` read: the handlers' EventView has it
    all, and so does what ingest builds for an endpoint that orders its events."""

    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> JSON: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def occurred_at(self) -> datetime | None: ...


# A key is stored (events.ordering_key) and shown: longer ones are refused as no key.
MAX_ORDERING_KEY_LENGTH = 255


def position_of(moment: datetime | None) -> int | None:
    """A time as an ordering position: microseconds since the epoch, UTC (a naive time is
    taken as UTC). Two events of the same whole second (Stripe's ``created``) are equal."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dotted(payload: JSON, path: str) -> JSON:
    """``payload["data"]["object"]["customer"]`` for ``data.object.customer``, or None
    where any step is missing or not an object."""
    value = payload
    for step in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def key_text(value: object) -> str | None:
    """An id from a payload as a key: text or an integer (Shopify's ids are numbers);
    anything else, empty, or too long to store, is no key.

    An integer is its digits (4711), and text is itself (cus_123), except text that reads
    as another JSON value (a number, true, false, null or a quoted string), which is
    written as a JSON string: the text "1" is the key ``"1"``, the number 1 the key
    ``1``, so that two entities never share one key."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, int):
        if not -(10**MAX_ORDERING_KEY_LENGTH) < value < 10**MAX_ORDERING_KEY_LENGTH:
            return None  # too long to store, and str() refuses integers past 4,300 digits
        return str(value)
    if len(value) > MAX_ORDERING_KEY_LENGTH:
        return None
    text = json.dumps(value, ensure_ascii=False) if _reads_as_json(value) else value
    return stored_key(text)


def stored_key(value: object) -> str | None:
    """A plugin's ``ordering_key`` as ingest stores it: text as it is (the plugin's own
    ``key_text`` has written it), an integer as ``key_text`` writes it; None for anything
    else, and for empty or too long text, a NUL or a lone surrogate."""
    if not isinstance(value, str):
        return key_text(value)
    if not value or len(value) > MAX_ORDERING_KEY_LENGTH:
        return None
    return value if storable(value) else None


# The first characters of text that JSON reads as a number, true, false, null or a string
# (with the whitespace JSON allows before them; NaN and Infinity are Python's extensions).
_JSON_SCALAR_STARTS = frozenset('-0123456789"tfnNI \t\n\r')


def _reads_as_json(text: str) -> bool:
    """Whether ``text`` is the JSON of a number, true, false, null or a string."""
    if text[:1] not in _JSON_SCALAR_STARTS:
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return not isinstance(value, list | dict)
