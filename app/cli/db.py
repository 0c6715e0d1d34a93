"""`hooklatch db`: the schema."""

from __future__ import annotations

import click

from hooklatch.cli.context import settings_of


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
    command.upgrade(alembic_config(settings.sqlalchemy_url), revision)
    click.echo(f"database at revision {revision}")
