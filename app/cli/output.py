"""How commands print: JSON with --json, otherwise a line per item."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import click

from hooklatch.display import visible


def echo_json(value: object) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def emit(
    rows: Sequence[dict[str, Any]], *, as_json: bool, line: Callable[[dict[str, Any]], str]
) -> None:
    """The rows as one JSON list, or one line each."""
    if as_json:
        echo_json(list(rows))
        return
    for row in rows:
        click.echo(line(row))


def printable(text: str) -> str:
    """``text`` safe to print on a terminal, and unlike any other text: a control
    character (an escape sequence in an ordering key taken from a payload, a newline in
    an error) or a format character (a right-to-left override) is shown escaped, and a
    backslash doubled (hooklatch.display)."""
    return visible(text)
