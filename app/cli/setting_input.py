"""A destination's settings given to a command: the plain ones as --set NAME=VALUE, the
secret ones (a broker URL with its password, a signing secret) never on the command line,
where `ps` and shell history would show them: at one hidden prompt each, or as NAME=VALUE
lines from stdin or a file. Messages name settings and line numbers, never a value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TextIO

import click

from hooklatch.cli.credential_input import KEY_VALUE
from hooklatch.forwarding.kinds.base import Field

SET_HELP = "A setting of the kind that is not secret (NATS' subject); repeat for several."
SECRETS_STDIN_HELP = (
    "Read the kind's secret settings from stdin, as NAME=VALUE lines, instead of asking "
    "for each at a hidden prompt."
)
SECRETS_FILE_HELP = "Read the kind's secret settings from this file, as NAME=VALUE lines."


def read_settings(
    kind_name: str, sets: Sequence[str], from_stdin: bool, file: TextIO | None
) -> dict[str, str]:
    """The settings given: the plain ones from --set, the secret ones from stdin or a
    file, else each asked for at a hidden prompt. A secret setting given with --set is
    refused, so that it never sits on the command line. Messages name settings, never a
    value."""
    fields = _fields(kind_name)
    given = _key_values(sets)
    for name in sorted(given):
        if name in fields and fields[name].secret:
            raise click.BadParameter(
                f"{name} is a secret setting: give it at the hidden prompt, with "
                "--secrets-from-stdin or with --secrets-file",
                param_hint="--set",
            )
    if from_stdin and file is not None:
        raise click.UsageError("give --secrets-from-stdin or --secrets-file, not both")
    if from_stdin:
        with click.open_file("-") as stream:
            secrets = parse_secrets(stream.read())
    elif file is not None:
        secrets = parse_secrets(file.read())
    else:
        secrets = _prompt_secrets(kind_name, fields)
    twice = sorted(secrets.keys() & given.keys())
    if twice:
        raise click.UsageError(f"{twice[0]} is given twice")
    return {**given, **secrets}


def _fields(kind_name: str) -> Mapping[str, Field]:
    """The kind's settings; none for a kind that does not exist (the service says so)."""
    from hooklatch.forwarding import kinds

    try:
        return kinds.kind(kind_name).fields
    except ValueError:
        return {}


def _prompt_secrets(kind_name: str, fields: Mapping[str, Field]) -> dict[str, str]:
    given = {}
    for name, field in fields.items():
        if not field.secret:
            continue
        click.echo(f"{name}: {field.help}", err=True)
        if field.required:
            value = click.prompt(f"{kind_name} {name} (input hidden)", hide_input=True)
        else:
            label = f"{kind_name} {name} (input hidden; empty to leave it out)"
            value = click.prompt(label, hide_input=True, default="", show_default=False)
        if value.strip():
            given[name] = value.strip()
    return given


def parse_secrets(text: str) -> dict[str, str]:
    """NAME=VALUE lines (blank lines and # comments skipped)."""
    found: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        matched = KEY_VALUE.fullmatch(line.rstrip("\r"))
        if matched is None:
            raise click.UsageError(f"line {number} of the secret settings is not NAME=VALUE")
        name, value = matched.group(1), matched.group(2).strip()
        if name in found:
            raise click.UsageError(f"the secret settings give {name!r} twice")
        found[name] = value
    if not found:
        raise click.UsageError("no secret settings were given")
    return found


def _key_values(pairs: Sequence[str]) -> dict[str, str]:
    result: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            # Never quoted: a secret may have been given here by mistake.
            raise click.BadParameter("each is NAME=VALUE", param_hint="--set")
        if name in result:
            raise click.BadParameter(f"{name} is given twice", param_hint="--set")
        result[name] = value
    return result
