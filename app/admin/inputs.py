"""What the admin API reads from a request: whole numbers in paths and queries, a JSON
object body, its known fields, text, lists of text, flags, times and credentials (as the
database can hold them), and who acts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

from flask import request

from hooklatch.errors import BadRequest, storable
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.operations.access import request_address

MAX_ID = 2**63 - 1  # events.id is a BIGINT


def api_actor(data: Mapping[str, JSON]) -> str:
    """Who acts, as the API records it: ``requested_by`` (else admin-api) and the address."""
    requested_by = (text_field(data, "requested_by") or "admin-api")[:150]
    return f"{requested_by} ({request_address()})"


def whole_number(name: str, text: str, *, high: int) -> int:
    """``text`` as a number from 1 to ``high``, written in ASCII digits; 400 otherwise
    (a negative limit is an error on PostgreSQL and every row on SQLite, an id past
    BIGINT an error on both)."""
    if not (text.isascii() and text.isdigit()) or len(text) > len(str(high)):
        number = 0
    else:
        number = int(text)
    if not 1 <= number <= high:
        raise BadRequest(f"{name} must be a whole number from 1 to {high}", reason="bad_parameter")
    return number


def json_object() -> JSONObject:
    """The request's JSON object; none (an empty body) is an empty one."""
    body = request.get_data(cache=False)
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested past what json parses
        data = None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object", reason="malformed_body")
    return data


def text_field(data: Mapping[str, JSON], name: str, *, reason: str = "bad_parameter") -> str | None:
    """A text field of the body, as the database can store it: no NUL character and no
    lone surrogate ("\\ud800" is valid JSON, not UTF-8)."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not storable(value):
        raise BadRequest(f"{name} must be text (no NUL character)", reason=reason)
    return value


def known_fields(data: JSONObject, allowed: frozenset[str]) -> JSONObject:
    """``data``, or 400 ``bad_parameter`` naming the first field it has that is not allowed."""
    unknown = sorted(data.keys() - allowed)
    if unknown:
        raise BadRequest(f"unknown field {unknown[0][:40]!r}", reason="bad_parameter")
    return data


def text_list(data: Mapping[str, JSON], name: str) -> list[str] | None:
    """A list of non-empty text (event types); None if left out."""
    values = data.get(name)
    if values is None:
        return None
    if not isinstance(values, list) or not all(
        isinstance(v, str) and v and storable(v) for v in values
    ):
        raise BadRequest(f"{name} must be a list of non-empty text", reason="bad_parameter")
    return [str(v) for v in values]


def flag(data: Mapping[str, JSON], name: str) -> bool:
    """A true-or-false field; false if left out."""
    value = data.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false", reason="bad_parameter")
    return value


def moment(
    data: Mapping[str, JSON], name: str, *, reason: str = "bad_parameter"
) -> datetime | None:
    """An ISO 8601 time (UTC where it names no offset); None if left out."""
    text = text_field(data, name, reason=reason)
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f"{name} must be an ISO 8601 time (2026-11-25T08:00:00Z)", reason=reason
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def credential(data: Mapping[str, JSON], name: str = "credential") -> dict[str, str]:
    """A credential for a provider's API: an object of non-empty text values. The message
    names a field at most, never a value."""
    values = data.get(name)
    if not isinstance(values, dict) or not values:
        raise BadRequest(f"{name} must be an object of its fields", reason="bad_credential")
    checked = {}
    for field, value in values.items():
        if not (isinstance(value, str) and value and storable(value) and storable(field)):
            raise BadRequest(
                f"each field of {name} must be non-empty text (no NUL character)",
                reason="bad_credential",
            )
        checked[field] = value
    return checked
