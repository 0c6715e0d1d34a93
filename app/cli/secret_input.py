"""Secrets given to a command: from a file, from stdin or at a hidden prompt, which keep
them out of `ps` and shell history. `--secret VALUE` still works, for scripts, with a
warning on stderr that names those ways."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

import click

STDIN = "-"
VALUE_HELP = (
    "Signing secret, or - to read it from stdin. A value given here shows in `ps` and "
    "shell history: prefer - or --secret-file."
)
FILE_HELP = "Read the signing secret from this file (- for stdin)."
ON_COMMAND_LINE = (
    "warning: a secret given as --secret VALUE shows in `ps` and in the shell's history. "
    "Give it with --secret-file PATH, or with --secret - to read it from stdin; "
    "`hooklatch endpoints secrets add` given neither asks for it at a hidden prompt."
)


def read_secrets(values: Sequence[str], files: Sequence[TextIO]) -> list[str]:
    """The secrets given with --secret (``-``: read stdin) and --secret-file, in that
    order; a trailing line break is not part of a secret. A value on the command line is
    taken, with a warning."""
    from_stdin = values.count(STDIN) + sum(1 for f in files if f.name == "<stdin>")
    if from_stdin > 1:
        raise click.UsageError("stdin holds one secret: give the others with --secret-file")
    if any(value != STDIN for value in values):
        click.echo(ON_COMMAND_LINE, err=True)
    secrets = [_read_stdin() if value == STDIN else value for value in values]
    return secrets + [_stripped(f.read()) for f in files]


def prompt_secret(label: str) -> str:
    """Ask for a secret at a prompt that does not echo it."""
    return _stripped(click.prompt(label, hide_input=True))


def _read_stdin() -> str:
    with click.open_file(STDIN) as stream:
        return _stripped(stream.read())


def _stripped(text: str) -> str:
    return text.rstrip("\r\n")
