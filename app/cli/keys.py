"""`hooklatch keys`: the Fernet keys that encrypt secrets at rest."""

from __future__ import annotations

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of


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
@friendly
def keys_rotate(ctx: click.Context) -> None:
    """Re-encrypt every stored secret, secret option and API credential with the first
    key (a forwarding destination's settings too), and key the secrets' fingerprints to
    it; then older keys can be dropped."""
    from hooklatch import audit
    from hooklatch.endpoints.service import rotate_keys
    from hooklatch.forwarding.destinations import rotate_destinations
    from hooklatch.reconcile.credentials import rotate_credentials

    runtime = runtime_of(ctx)
    with runtime.session_factory.begin() as session:
        rotated = (
            rotate_keys(session, runtime.box)
            + rotate_credentials(session, runtime.box)
            + rotate_destinations(session, runtime.box)
        )
        # Every secret's fingerprint changes: earlier entries name them by the old ones.
        audit.record(
            session,
            actor=cli_actor(),
            action="keys_rotated",
            target="every secret",
            now=runtime.clock(),
            details={"values": rotated},
        )
    click.echo(f"re-encrypted {rotated} values with the first key; fingerprints recomputed")
