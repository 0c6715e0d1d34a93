"""Checking a destination's settings, the same way for every kind: the names it takes,
the ones it needs, its URL's scheme, and what is shown of a URL that may hold a password.

No message here quotes a value: any of them may be a secret."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from urllib.parse import SplitResult, urlsplit, urlunsplit

from hooklatch.forwarding.kinds.base import Connection, Field


def settings_of(kind: str, fields: Mapping[str, Field], given: Mapping[str, str]) -> dict[str, str]:
    """The settings given, with the defaults of those left out; ValueError names a setting
    the kind does not take, or one it needs that is missing or empty."""
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise ValueError(
            f"a {kind} destination takes no setting {', '.join(unknown)} "
            f"(it takes {', '.join(fields)})"
        )
    values = {name: field.default for name, field in fields.items() if field.default is not None}
    values.update({name: value.strip() for name, value in given.items()})
    missing = [name for name, field in fields.items() if field.required and not values.get(name)]
    if missing:
        raise ValueError(f"a {kind} destination needs {', '.join(missing)}")
    # An optional setting given empty is left out, as if it were not given.
    return {n: v for n, v in values.items() if v or fields[n].default is not None}


def split(fields: Mapping[str, Field], values: Mapping[str, str], *, shown: str) -> Connection:
    """The checked settings, parted into those shown as they are and the secrets."""
    return Connection(
        settings={name: value for name, value in values.items() if not fields[name].secret},
        secrets={name: value for name, value in values.items() if fields[name].secret},
        shown=shown,
    )


def checked_url(url: str, *, schemes: Collection[str], name: str = "url") -> SplitResult:
    """The URL's parts, if its scheme is one of ``schemes`` and it names a host."""
    wanted = " or ".join(f"{scheme}://" for scheme in schemes)
    try:
        parts = urlsplit(url)
        valid = parts.port != 0  # reading the port checks that it is a number in range
    except ValueError:  # whose message would quote the URL
        valid = False
    if not valid:
        raise ValueError(f"{name} is not a valid URL")
    if parts.scheme.lower() not in schemes:
        raise ValueError(f"{name} should start with {wanted}")
    if not parts.hostname:
        raise ValueError(f"{name} names no host")
    return parts


def shown_url(parts: SplitResult) -> str:
    """The URL as every face shows it: scheme, host and port, and of the path only its
    first segment, without the user information (a password, or a token in the user's
    place), the query, or the rest of the path: any of them may hold a token (a Slack or
    Discord webhook's path does)."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    segments = [segment for segment in parts.path.split("/") if segment]
    path = ""
    if segments:
        path = f"/{segments[0]}" + ("/…" if len(segments) > 1 else "")
    return urlunsplit((parts.scheme, netloc, path, "", ""))
