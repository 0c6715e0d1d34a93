"""The `hooklatch` command: one module per group of subcommands."""

from __future__ import annotations

import click

from hooklatch.cli.cleanup import cleanup
from hooklatch.cli.db import db
from hooklatch.cli.destinations import destinations
from hooklatch.cli.endpoints import endpoints
from hooklatch.cli.events import events
from hooklatch.cli.keys import keys
from hooklatch.cli.ordering import ordering
from hooklatch.cli.processes import relay, send_test, serve, worker
from hooklatch.cli.providers import providers_list
from hooklatch.cli.reconcile import reconcile
from hooklatch.cli.status import status


@click.group()
@click.version_option(
    package_name="hooklatch", prog_name="hooklatch", message="%(prog)s %(version)s"
)
@click.pass_context
def main(ctx: click.Context) -> None:
    """hooklatch: receive webhooks, store each event once, run handlers once."""
    from hooklatch import logs
    from hooklatch.settings import SettingsError

    try:
        logs.configure()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    ctx.ensure_object(dict)


for command in (
    keys,
    db,
    endpoints,
    events,
    ordering,
    destinations,
    relay,
    worker,
    serve,
    send_test,
    providers_list,
    reconcile,
    cleanup,
    status,
):
    main.add_command(command)

__all__ = ["main"]
