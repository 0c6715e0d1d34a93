"""Reading what a sender wrote: unix timestamps in headers, times in payloads, JSON bodies.

Each returns None, or raises MalformedRequest, for input that is not what a provider
sends, and never lets through what would fail later (a 500, or a row that cannot be read
back): a digit that is not ASCII, a time past the year 9999, JSON nested past what the
parser can take.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from hooklatch.errors import MalformedRequest
from hooklatch.jsontypes import JSON, JSONObject

# What json.loads raises on a body that is not JSON: RecursionError for one nested past
# the interpreter's recursion limit.
NOT_JSON = (UnicodeDecodeError, ValueError, RecursionError)
MAX_TIMESTAMP_DIGITS = 15


def unix_timestamp(text: str) -> int | None:
    """A unix time written as 1 to 15 ASCII digits (milliseconds reach the year 33658), or
    None. ``str.isdigit`` also passes "²", which ``int`` then refuses, and ``int`` reads
    "+1", "1_000" and Arabic-Indic digits: no provider writes a time so."""
    if 0 < len(text) <= MAX_TIMESTAMP_DIGITS and text.isascii() and text.isdigit():
        return int(text)
    return None


def unix_time(value: object, *, milliseconds: bool = False) -> datetime | None:
    """A payload's unix time (seconds, or milliseconds) in UTC, or None when it is absent,
    not a number (true is not 1) or outside the years 1 to 9999.

    The time is what the sender says; an event that verified is kept without it rather
    than refused, which would lose it to the sender's retries."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value / 1000 if milliseconds else value, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def occurred_at(value: object) -> datetime | None:
    """An ISO 8601 time from a payload, in UTC (a naive one is taken as UTC), or None when
    it is absent, not one, or not in the years 1 to 9999 once in UTC ("9999-12-31T23:00
    -05:00"): stored as it is, such a time could not be read back."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    try:
        return when.astimezone(UTC)
    except OverflowError:
        return None


def load_json(body: bytes | str) -> JSON:
    """The body as JSON; malformed_body when it is not JSON, not UTF-8, or nested too
    deeply for the parser (it raises RecursionError past the interpreter's recursion
    limit, about a thousand levels)."""
    try:
        value: JSON = json.loads(body)
    except NOT_JSON:
        raise MalformedRequest("body is not valid JSON", reason="malformed_body") from None
    return value


def json_digest(value: JSON) -> str:
    """The hex SHA-256 of ``value`` as canonical JSON (sorted keys, no spaces): the key of
    an item that carries no id. malformed_body when it is nested too deeply to write."""
    try:
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    except RecursionError:
        raise MalformedRequest("body is nested too deeply", reason="malformed_body") from None
    return hashlib.sha256(canonical.encode()).hexdigest()


def json_object(body: bytes) -> JSONObject:
    payload = load_json(body)
    if not isinstance(payload, dict):
        raise MalformedRequest("body is not a JSON object", reason="malformed_body")
    return payload


def id_and_type(
    payload: JSONObject, *, id_field: str = "id", type_field: str = "type", what: str
) -> tuple[str, str]:
    """An event's id (text, not empty) and type (text) from these fields of its JSON;
    malformed_body, saying that ``what`` ("a Stripe event") needs them, otherwise."""
    event_id, event_type = payload.get(id_field), payload.get(type_field)
    if not isinstance(event_id, str) or not event_id or not isinstance(event_type, str):
        raise MalformedRequest(
            f"{what} needs string {id_field} and {type_field}", reason="malformed_body"
        )
    return event_id, event_type
