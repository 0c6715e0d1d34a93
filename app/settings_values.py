"""How a setting's text becomes a value: typed readers that name the variable in every
error, and the checks of values that could not work (keys, tokens, addresses). The
settings themselves, their defaults and how they fit together are in settings.py."""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from cryptography.fernet import Fernet

Number = TypeVar("Number", int, float)


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names it."""


def read_int(environ: Mapping[str, str], name: str, default: int, *, minimum: int = 0) -> int:
    value = _converted(environ, name, int, "a whole number")
    if value is None:
        return default
    if value < minimum:
        raise SettingsError(f"{name} must be at least {minimum}, got {value}")
    return value


def read_float(environ: Mapping[str, str], name: str, default: float) -> float:
    value = _converted(environ, name, float, "a number")
    if value is None:
        return default
    if not math.isfinite(value):
        raise SettingsError(f"{name} must be a finite number, got {environ[name].strip()!r}")
    if value < 0:
        raise SettingsError(f"{name} must not be negative, got {value}")
    return value


def _converted(
    environ: Mapping[str, str], name: str, convert: Callable[[str], Number], kind: str
) -> Number | None:
    """The variable's text converted, or None when it is unset or blank; a SettingsError
    saying it must be ``kind`` when it cannot be."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    try:
        return convert(raw)
    except ValueError:
        raise SettingsError(f"{name} must be {kind}, got {raw!r}") from None


def read_flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    raw = (environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise SettingsError(f"{name} must be true or false, got {raw!r}")


def comma_list(raw: str | None) -> tuple[str, ...]:
    return tuple(part.strip() for part in (raw or "").split(",") if part.strip())


def folders(raw: str | None) -> tuple[Path, ...]:
    """Folders separated by os.pathsep, a relative one from the working directory. Unset:
    the working directory; set to an empty value: none."""
    if raw is None:
        return (Path.cwd(),)
    return tuple(Path.cwd() / part.strip() for part in raw.split(os.pathsep) if part.strip())


def check_fernet_keys(keys: tuple[str, ...]) -> None:
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            raise SettingsError(
                f"HOOKLATCH_SECRET_KEYS: key {position} is not a valid Fernet key "
                "(32 url-safe base64-encoded bytes; make one with `hooklatch keys generate`)"
            ) from None


# A token anyone who reaches the web port may guess at: long, and not a few characters
# repeated. The lockout (HOOKLATCH_ADMIN_LOCKOUT_*) slows guessing; only length defeats it.
MIN_TOKEN_LENGTH = 32
MIN_TOKEN_CHARACTERS = 8
MAKE_A_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'  # noqa: S105


def check_token(name: str, token: str | None) -> None:
    """Refuse a token that could be guessed; the message never shows it."""
    if token is None:
        return
    repeated = (token + token).find(token, 1) < len(token)  # "abcabc": "abc" twice
    if len(token) < MIN_TOKEN_LENGTH or len(set(token)) < MIN_TOKEN_CHARACTERS or repeated:
        raise SettingsError(
            f"{name} is too weak: it must be at least {MIN_TOKEN_LENGTH} characters, not a "
            f"few characters repeated, and random. Make one with `{MAKE_A_TOKEN}`"
        )


def check_networks(name: str, networks: tuple[str, ...]) -> None:
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError:
            raise SettingsError(
                f"{name}: {network!r} is not an address or a network (10.0.0.0/8, ::1)"
            ) from None


def check_address(name: str, address: str) -> None:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise SettingsError(
            f"{name} must be an IP address (127.0.0.1, ::1, 0.0.0.0 for all), got {address!r}"
        ) from None


def refuse_renamed(environ: Mapping[str, str]) -> None:
    """A setting hooklatch no longer reads stops every process, saying what replaced it."""
    from hooklatch.renamed import SETTINGS

    for old, instead in SETTINGS.items():
        if (environ.get(old) or "").strip():
            raise SettingsError(f"{old} is no longer read: {instead}")
