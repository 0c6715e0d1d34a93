"""`hooklatch cleanup`: one retention pass by hand (relays run them all the time)."""

from __future__ import annotations

import click

from hooklatch.cli.context import friendly, runtime_of
from hooklatch.cli.output import echo_json
from hooklatch.display import counted


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

    def gone(count: int, noun: str, plural: str | None = None, how: str = "deleted") -> str:
        verb = "would be" if dry_run else "was" if count == 1 else "were"
        return f"{counted(count, noun, plural)} {verb} {how}"

    click.echo(
        f"payload clock {settings.payload_retention_days:g} days, "
        f"dedupe clock {settings.dedupe_retention_days:g} days"
    )
    for line in (
        gone(done.pruned, "payload", how="pruned") + " (processed or ignored events)",
        gone(done.deleted, "event")
        + (", with its" if done.deleted == 1 else ", with their")
        + " attempts and replays",
        gone(done.deleted_refusals, "refusal count"),
        gone(done.deleted_heartbeats, "heartbeat") + " of processes silent for a day",
        gone(done.deleted_activity, "hour") + " of activity",
        gone(done.deleted_batches, "finished bulk replay"),
        gone(done.deleted_audit, "audit entry", "audit entries")
        + f" (older than {settings.audit_retention_days:g} days)",
        gone(done.deleted_keys, "ordering key") + " (idle past the dedupe clock)",
        gone(done.deleted_sessions, "expired console session"),
        gone(done.deleted_token_failures, "expired count") + " of failed admin-token attempts",
    ):
        click.echo(line)
    if not dry_run:
        click.echo(f"{counted(done.batches, 'batch', 'batches')} in {done.seconds:.2f} s")
    if done.oldest_expired_seconds:
        click.echo(
            f"left behind: the oldest expired row is {done.oldest_expired_seconds:.0f} s "
            "past its clock"
        )
