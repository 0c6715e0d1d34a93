"""An endpoint's credential for its provider's API, given to a command: from a file (or
stdin) as JSON or KEY=VALUE lines, else one hidden prompt per field. Never an option's
value: a credential on the command line shows in `ps` and shell history. Messages name
fields and line numbers, never a value."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TextIO

import click

from hooklatch.providers.base import Provider

FILE_HELP = (
    "Read the credential for the provider's API from this file (- for stdin): a JSON "
    "object, or KEY=VALUE lines (a PEM key may follow its KEY= over several lines). "
    "Without it, each field is asked for at a hidden prompt."
)
KEY_VALUE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)")
PEM_BEGIN = "-----BEGIN"
PEM_END = "-----END"


def read_credential(provider: Provider, file: TextIO | None) -> dict[str, str]:
    """The credential's fields as given; the provider checks them when they are stored
    (``check_credentials``). A field left empty is left out, where the provider takes
    one set of fields or another (GitHub: a token, or a GitHub App's three)."""
    if not provider.credential_fields:
        raise click.UsageError(f"hooklatch cannot reach {provider.name}'s API")
    if file is not None:
        return _given(parse_credential(file.read()))
    return prompt_credential(provider)


def parse_credential(text: str) -> dict[str, str]:
    """A JSON object of fields, or KEY=VALUE lines (blank lines and # comments skipped)."""
    if text.lstrip().startswith("{"):
        return _json_fields(text)
    fields: dict[str, str] = {}
    lines = iter(enumerate(text.splitlines(), start=1))
    for number, line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        matched = KEY_VALUE.fullmatch(line.rstrip("\r"))
        if matched is None:
            raise click.UsageError(f"line {number} of the credential file is not KEY=VALUE")
        key, value = matched.group(1), matched.group(2).strip()
        if key in fields:
            raise click.UsageError(f"the credential file gives {key!r} twice")
        if value.startswith(PEM_BEGIN):
            value = _pem(value, lines, key)
        fields[key] = value
    if not fields:
        raise click.UsageError("the credential file is empty")
    return fields


def _pem(first: str, lines: Iterator[tuple[int, str]], key: str) -> str:
    """A PEM block that starts on KEY='s line, up to and with its -----END line."""
    block = [first]
    for _, line in lines:
        block.append(line.strip())
        if line.strip().startswith(PEM_END):
            return "\n".join(block) + "\n"
    raise click.UsageError(f"the credential file's {key!r} has no {PEM_END} line")


def _json_fields(text: str) -> dict[str, str]:
    try:
        data = json.loads(text)
    except ValueError:
        raise click.UsageError("the credential file is not valid JSON") from None
    if not isinstance(data, dict):
        raise click.UsageError("the credential file's JSON is not an object of fields")
    fields = {}
    for key, value in data.items():
        # An id may be written as a number (a GitHub App's id, its installation's).
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            raise click.UsageError(f"the credential file's {key!r} is not text")
        fields[key] = value
    return fields


def prompt_credential(provider: Provider) -> dict[str, str]:
    """One hidden prompt per field, in the provider's order, until what was given is a
    whole credential (a GitHub token asks for no App field); empty leaves a field out."""
    given: dict[str, str] = {}
    fields = provider.credential_fields
    hint = "input hidden; empty to leave it out" if len(fields) > 1 else "input hidden"
    for name, meaning in fields.items():
        click.echo(f"{name}: {meaning}", err=True)
        value = _prompt_field(f"{provider.name} {name} ({hint})")
        if value:
            given[name] = value
        if given and _whole(provider, given):
            break
    return given


def _prompt_field(label: str) -> str:
    """A hidden answer; a pasted PEM key is read on, line by line, to its -----END line."""
    first = click.prompt(label, hide_input=True, default="", show_default=False).strip()
    if not first.startswith(PEM_BEGIN):
        return first
    block = [first]
    while not block[-1].startswith(PEM_END):
        line = click.prompt("", hide_input=True, default="", show_default=False, prompt_suffix="")
        block.append(line.strip())
    return "\n".join(block) + "\n"


def _whole(provider: Provider, given: Mapping[str, str]) -> bool:
    try:
        provider.check_credentials(dict(given))
    except ValueError:
        return False
    return True


def _given(fields: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in fields.items() if value}
