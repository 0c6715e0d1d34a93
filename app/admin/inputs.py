"""What the admin API reads from a request: whole numbers in paths and queries, a JSON
object body and its text fields (as the database can hold them), and who acts."""

from __future__ import annotations

import json
from collections.abc import Mapping

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


def text_field(data: Mapping[str, JSON], name: str) -> str | None:
    """A text field of the body, as the database can store it: no NUL character and no
    lone surrogate ("\\ud800" is valid JSON, not UTF-8)."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not storable(value):
        raise BadRequest(f"{name} must be text (no NUL character)", reason="bad_parameter")
    return value
