"""`hooklatch cleanup`: one retention pass by hand (relays run them all the time)."""

from __future__ import annotations

import click

from hooklatch.cli.context import friendly, runtime_of
from hooklatch.cli.output import echo_json


@click.command("cleanup")
@click.option("--dry-run", is_flag=True, help="Count what the pass would do; change nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def cleanup(ctx: click.Context, dry_run: bool, as_json: bool) -> None:
    """Prune expired payloads and delete expired events, as the relays do."""
    from hooklatch.operations.retention import Retention

    runtime = runtime_of(ctx)
    settings = runtime.settings
    done = Retention(runtime).once(dry_run=dry_run)
    if as_json:
        echo_json(done.as_dict())
        return
    verb = "would be" if dry_run else "were"
    click.echo(
        f"payload clock {settings.payload_retention_days:g} days, "
        f"dedupe clock {settings.dedupe_retention_days:g} days"
    )
    click.echo(f"{done.pruned} payloads {verb} pruned (processed or ignored events)")
    click.echo(f"{done.deleted} events {verb} deleted, with their attempts and replays")
    click.echo(f"{done.deleted_refusals} refusal counts {verb} deleted")
    click.echo(f"{done.deleted_heartbeats} heartbeats of processes silent for a day {verb} deleted")
    click.echo(
        f"{done.deleted_activity} hours of activity and {done.deleted_batches} finished bulk "
        f"replays {verb} deleted; {done.deleted_audit} audit entries older than "
        f"{settings.audit_retention_days:g} days {verb} deleted"
    )
    click.echo(f"{done.deleted_keys} ordering keys idle past the dedupe clock {verb} deleted")
    click.echo(
        f"{done.deleted_sessions} expired console sessions and {done.deleted_token_failures} "
        f"expired counts of failed admin-token attempts {verb} deleted"
    )
    if not dry_run:
        click.echo(f"{done.batches} batches in {done.seconds:.2f} s")
    if done.oldest_expired_seconds:
        click.echo(
            f"left behind: the oldest expired row is {done.oldest_expired_seconds:.0f} s "
            "past its clock"
        )
