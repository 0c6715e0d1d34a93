"""`hooklatch keys`: the Fernet keys that encrypt secrets at rest."""

from __future__ import annotations

import click
from sqlalchemy import select

from hooklatch.cli.context import runtime_of


@click.group()
def keys() -> None:
    """Keys for HOOKLATCH_SECRET_KEYS."""


@keys.command("generate")
def keys_generate() -> None:
    """Print a new Fernet key (put it first in HOOKLATCH_SECRET_KEYS to rotate)."""
    from hooklatch.crypto import generate_key

    click.echo(generate_key())


@keys.command("rotate")
@click.pass_context
def keys_rotate(ctx: click.Context) -> None:
    """Re-encrypt every stored secret with the first key; then older keys can be dropped."""
    from hooklatch.endpoints.models import EndpointSecret

    runtime = runtime_of(ctx)
    with runtime.session_factory.begin() as session:
        rows = session.scalars(select(EndpointSecret)).all()
        for row in rows:
            row.ciphertext = runtime.box.rotate(row.ciphertext)
    click.echo(f"re-encrypted {len(rows)} secrets with the first key")
