"""`hooklatch db`: the schema."""

from __future__ import annotations

import click

from hooklatch.cli.context import settings_of
from hooklatch.settings import Settings


@click.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True)
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Apply migrations (the Procfile's release step)."""
    from alembic import command

    from hooklatch.migrations import alembic_config

    settings = settings_of(ctx).with_embedded_key()
    if settings.database_url is None:
        settings.instance_path.mkdir(parents=True, exist_ok=True)
    before = _revision(settings.sqlalchemy_url)
    command.upgrade(alembic_config(settings.sqlalchemy_url), revision)
    after = _revision(settings.sqlalchemy_url)
    click.echo(
        f"database at revision {after} "
        + ("(no change)" if after == before else f"(was: {before})")
    )
    if revision == "head" and settings.secret_keys:
        _key_fingerprints(settings)


def _revision(url: str) -> str:
    """The revision the database is at, as Alembic records it; ``none`` before the first."""
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.pool import NullPool

    from hooklatch.db import make_engine

    engine = make_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            heads = MigrationContext.configure(connection).get_current_heads()
    finally:
        engine.dispose()
    return ", ".join(sorted(heads)) or "none"


def _key_fingerprints(settings: Settings) -> None:
    """Secrets stored before fingerprints were keyed hold a bare SHA-256 prefix, which a
    migration cannot replace: it has no key. The release step has, so it does it here."""
    from hooklatch.crypto import SecretBox
    from hooklatch.db import make_engine, make_session_factory
    from hooklatch.endpoints.service import refresh_fingerprints

    engine = make_engine(settings.sqlalchemy_url)
    try:
        with make_session_factory(engine).begin() as session:
            changed, unreadable = refresh_fingerprints(session, SecretBox(settings.secret_keys))
    finally:
        engine.dispose()
    if changed:
        click.echo(f"{changed} secret fingerprints keyed to the first key")
    if unreadable:
        click.echo(
            f"{unreadable} secrets cannot be decrypted with HOOKLATCH_SECRET_KEYS: "
            "their fingerprints are unchanged",
            err=True,
        )
