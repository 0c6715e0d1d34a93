"""How Stripe's API reads parameters and writes errors, for tests/support/fake_stripe.py.

Parameters arrive form-encoded as stripe-python sends them, nested with brackets
(``created[gte]=1``, ``enabled_events[0]=*``); errors leave as ``{"error": {"type",
"message", "code", "doc_url", "param"}}`` (Stripe's OpenAPI description, ``error``).
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import operator
import re
import string
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TypeVar
from urllib.parse import urlsplit

T = TypeVar("T")
# Where an object stands in a list: its creation time, then the order it was made in.
Position = tuple[int, int]

EVENT_WORD = frozenset(string.ascii_lowercase + string.digits + "_")
DEFAULT_LIMIT = 10
MAX_LIMIT = 100
BRACKETS = re.compile(r"\[([^\]]*)\]")
Compare = Callable[[int, int], bool]
BOUNDS: dict[str, Compare] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
# What a scripted fault answers by status: Stripe's type, code and message for it.
FAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", "parameter_missing", "Missing required param: url."),
    401: ("invalid_request_error", None, "Invalid API Key provided: {key}"),
    403: (
        "invalid_request_error",
        None,
        "The provided key '{key}' does not have the required permissions for this endpoint "
        "on account '{account}'.",
    ),
    404: ("invalid_request_error", "resource_missing", "No such object: the id is unknown."),
    429: (
        "invalid_request_error",
        "rate_limit",
        "Request rate limit exceeded. Learn more about rate limits here "
        "https://stripe.com/docs/rate-limits.",
    ),
}
SERVER_FAULT = ("api_error", None, "An unknown error occurred")


class ApiError(Exception):
    """An error answer: its status, Stripe's error object's fields, extra headers."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type
        self.code, self.param = code, param
        self.headers = dict(headers or {})
        if status == 401:
            self.headers.setdefault("WWW-Authenticate", 'Basic realm="Stripe"')

    @classmethod
    def for_status(cls, status: int, key: str, account: str) -> ApiError:
        """Stripe's answer of this status; ``key`` is the request's key, masked."""
        kind, code, message = FAULTS.get(status, SERVER_FAULT)
        return cls(status, message.format(key=key, account=account), type=kind, code=code)

    def body(self) -> bytes:
        fields: dict[str, str] = {"type": self.type, "message": self.message}
        if self.code:
            fields["code"] = self.code
            fields["doc_url"] = "https://stripe.com/docs/error-codes/" + self.code.replace("_", "-")
        if self.param:
            fields["param"] = self.param
        return json.dumps({"error": fields}, indent=2).encode()


def masked(key: str) -> str:
    """A key as Stripe's messages show it: its kind and mode, stars, its last 4 characters."""
    found = re.match(r"(?:sk|rk|pk)_(?:test|live)_", key)
    prefix = found.group(0) if found else ""
    rest = key[len(prefix) :]
    return prefix + "*" * max(len(rest) - 4, 4) + rest[-4:]


def nested(pairs: Sequence[tuple[str, str]]) -> dict[str, object]:
    """Form pairs as the objects they stand for: ``a[b]`` an object, ``a[0]`` and ``a[]``
    an array."""
    root: dict[str, object] = {}
    for name, value in pairs:
        head, bracket, tail = name.partition("[")
        steps = [head, *BRACKETS.findall(bracket + tail)]
        node = root
        for step in steps[:-1]:
            child = node.setdefault(step, {})
            if not isinstance(child, dict):
                raise ApiError(400, f"Invalid object: {name}", param=head)
            node = child
        node[steps[-1] or str(len(node))] = value
    return {name: _arrays(value) for name, value in root.items()}


def _arrays(value: object) -> object:
    """Objects whose keys are all indices, as arrays in index order."""
    if not isinstance(value, dict):
        return value
    items = {name: _arrays(item) for name, item in value.items()}
    if items and all(name.isdigit() for name in items):
        return [items[name] for name in sorted(items, key=int)]
    return items


def known_only(params: Mapping[str, object], known: Collection[str]) -> None:
    for name in params:
        if name not in known:
            raise ApiError(
                400, f"Received unknown parameter: {name}", code="parameter_unknown", param=name
            )


def required(params: Mapping[str, object], name: str) -> object:
    if params.get(name) in (None, ""):
        raise ApiError(
            400, f"Missing required param: {name}.", code="parameter_missing", param=name
        )
    return params[name]


def integer(value: object, param: str) -> int:
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value):
        return int(value)
    raise ApiError(400, f"Invalid integer: {value}", code="parameter_invalid_integer", param=param)


def boolean(params: Mapping[str, object], name: str) -> bool | None:
    value = params.get(name)
    if value is None:
        return None
    if value in ("true", "false"):
        return value == "true"
    raise ApiError(400, f"Invalid boolean: {value}", param=name)


def created_bounds(value: object) -> list[tuple[Compare, int]]:
    """Tests of a ``created`` time, each a comparison and its bound: ``created=T`` or
    ``created[gt|gte|lt|lte]=T``."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(operator.eq, integer(value, "created"))]
    bounds = []
    for name, given in value.items():
        if name not in BOUNDS:
            raise ApiError(
                400,
                f"Received unknown parameter: created[{name}]",
                code="parameter_unknown",
                param=f"created[{name}]",
            )
        bounds.append((BOUNDS[name], integer(given, f"created[{name}]")))
    return bounds


def limit_of(params: Mapping[str, object]) -> int:
    if params.get("limit") is None:
        return DEFAULT_LIMIT
    limit = integer(params["limit"], "limit")
    if limit < 1:
        raise ApiError(400, "This value must be greater than or equal to 1.", param="limit")
    if limit > MAX_LIMIT:
        raise ApiError(400, f"This value must be less than or equal to {MAX_LIMIT}.", param="limit")
    return limit


def cursor_window(
    listed: Sequence[T],
    params: Mapping[str, object],
    position: Callable[[T], Position],
    place: Callable[[str, str], Position],
) -> tuple[list[T], bool]:
    """One page of ``listed`` (newest first, ``position`` descending) and whether more
    follow it: the first ``limit`` after ``starting_after``, or the last ``limit`` before
    ``ending_before``, by the cursor object's place (``place(id, param)``), which holds
    even when that object no longer matches the filters."""
    limit = limit_of(params)
    after, before = params.get("starting_after"), params.get("ending_before")
    if after and before:
        raise ApiError(
            400, "You may only specify one of these parameters: ending_before, starting_after."
        )
    if after:
        mark = place(str(after), "starting_after")
        rest = [item for item in listed if position(item) < mark]
        return rest[:limit], len(rest) > limit
    if before:
        mark = place(str(before), "ending_before")
        newer = [item for item in listed if position(item) > mark]
        return newer[-limit:], len(newer) > limit
    return list(listed[:limit]), len(listed) > limit


def key_of(authorization: str | None) -> str | None:
    """The key of ``Authorization: Bearer KEY`` or ``Basic base64(KEY:)``."""
    scheme, _, credentials = (authorization or "").strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer" and credentials:
        return credentials
    if scheme.lower() == "basic" and credentials:
        try:
            return base64.b64decode(credentials, validate=True).decode().partition(":")[0]
        except (binascii.Error, UnicodeDecodeError):
            return credentials
    return None


def type_matches(event_type: str, params: Mapping[str, object]) -> bool:
    """``type`` a name or a pattern with ``*`` ("invoice.*"), ``types`` names."""
    pattern, names = params.get("type"), params.get("types")
    if isinstance(pattern, str):
        return fnmatch.fnmatchcase(event_type, pattern.replace("[", "[[]").replace("?", "[?]"))
    if isinstance(names, list):
        return event_type in names
    return True


def valid_url(value: object) -> str:
    parts = urlsplit(str(value))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ApiError(400, f"Invalid URL: {value}", code="url_invalid", param="url")
    return str(value)


def enabled_events_of(value: object) -> list[str]:
    """A list of event names, or ["*"]; the names are Stripe's, dotted lower-case words."""
    if not isinstance(value, list) or not value:
        raise ApiError(400, "Invalid array", param="enabled_events")
    for index, name in enumerate(value):
        words = str(name).split(".")
        if name != "*" and (len(words) < 2 or not all(w and set(w) <= EVENT_WORD for w in words)):
            raise ApiError(
                400,
                f"Invalid enabled_events[{index}]: must be one of Stripe's event types",
                param=f"enabled_events[{index}]",
            )
    return [str(name) for name in value]


def metadata_of(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
