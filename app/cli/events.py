"""`hooklatch events`: stored events, their attempts and replays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.output import echo_json, emit, printable
from hooklatch.display import counted
from hooklatch.events.models import STATUSES, Event
from hooklatch.events.serialize import MAX_LIST_LIMIT

if TYPE_CHECKING:
    from hooklatch.services.replays import DryRun


@click.group()
def events() -> None:
    """Stored events, their attempts and replays."""


@events.command("list")
@click.option("--status", type=click.Choice(STATUSES))
@click.option("--limit", type=click.IntRange(1, MAX_LIST_LIMIT), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def events_list(ctx: click.Context, status: str | None, limit: int, as_json: bool) -> None:
    """The latest events, newest first."""
    from hooklatch.events.serialize import describe_event, list_events

    runtime = runtime_of(ctx)
    with runtime.session_factory() as session:
        rows = [describe_event(e) for e in list_events(session, status=status, limit=limit)]
    emit(rows, as_json=as_json, line=_event_line)


def _event_line(row: dict[str, Any]) -> str:
    """One event on a line; its type and id are the sender's, so printed escaped."""
    return (
        f"{row['id']:>8}  {row['status']:<9} {row['provider']:<8} {printable(row['type']):<28} "
        f"{printable(row['external_id'])}  attempts={row['attempts']}  {row['received_at']}"
    )


@events.command("show")
@click.argument("event_id", type=int)
@click.pass_context
@friendly
def events_show(ctx: click.Context, event_id: int) -> None:
    """One event with its attempts (errors included) and replays, as JSON."""
    from hooklatch.errors import NotFound
    from hooklatch.events.serialize import event_history

    runtime = runtime_of(ctx)
    with runtime.session_factory() as session:
        row = session.get(Event, event_id)
        if row is None:
            raise NotFound(f"no event {event_id}")
        echo_json(event_history(session, row))


@events.command("replay")
@click.argument("event_id", type=int, required=False)
@click.option("--status", type=click.Choice(STATUSES), help="Bulk: events in this state.")
@click.option("--provider", help="Bulk: events of this provider.")
@click.option("--endpoint", help="Bulk: events of this endpoint (id or name).")
@click.option("--type", "event_type", help="Bulk: event types matching this glob (invoice.*).")
@click.option("--external-id", help="Bulk: the provider's event id.")
@click.option("--since", help="Bulk: received since (ISO 8601, or an age: 30m, 2h, 7d).")
@click.option("--until", help="Bulk: received before (ISO 8601, or an age).")
@click.option("--dry-run", is_flag=True, help="Bulk: say what would be replayed, change nothing.")
@click.option(
    "--watermark",
    type=click.IntRange(min=0),
    help="Bulk: the dry run's watermark: replay nothing stored after it.",
)
@click.option("--reason", help="Why: recorded with the replay (required unless --dry-run).")
@click.option("--by", "requested_by", default=None, help="Who asks (default: your user name).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def events_replay(
    ctx: click.Context,
    event_id: int | None,
    dry_run: bool,
    watermark: int | None,
    reason: str | None,
    requested_by: str | None,
    as_json: bool,
    **filters: str | None,
) -> None:
    """Run handlers again: one event (EVENT_ID), or every event a filter matches, oldest
    first at HOOKLATCH_REPLAY_BATCH_RATE a second, in the background (a bulk replay)."""
    from hooklatch.events.browse import EventFilter
    from hooklatch.services import replays

    runtime = runtime_of(ctx)
    actor = cli_actor(requested_by)
    values = {"type" if k == "event_type" else k: v for k, v in filters.items()}
    chosen = EventFilter.parse(values, now=runtime.clock())
    if event_id is not None:
        if not chosen.is_empty() or dry_run:
            raise click.UsageError("give an EVENT_ID or a filter, not both")
        if not reason:
            raise click.UsageError("--reason is required")
        echo_json(replays.replay_event(runtime, event_id, actor=actor, reason=reason))
        return
    if chosen.is_empty():
        raise click.UsageError("give an EVENT_ID, or a filter (--status, --provider, ...)")
    if dry_run:
        _print_dry_run(replays.plan_bulk_replay(runtime, chosen), as_json=as_json)
        return
    if not reason:
        raise click.UsageError("--reason is required (or --dry-run)")
    shown = replays.start_bulk_replay(
        runtime, chosen, actor=actor, reason=reason, watermark=watermark
    )
    if as_json:
        echo_json(shown)
    else:
        click.echo(
            f"bulk replay {shown['id']}: {counted(shown['matched'], 'event')}, at most "
            f"{shown['rate']:g} a second; `hooklatch events batch {shown['id']}` shows how "
            "far it got"
        )


def _print_dry_run(found: DryRun, *, as_json: bool) -> None:
    if as_json:
        keys = ("matched", "over_cap", "watermark", "sample")
        echo_json({key: value for key, value in found.as_json().items() if key in keys})
        return
    shown = min(found.matched, found.cap)
    more = "more than " if found.over_cap else ""
    click.echo(
        f"{more}{counted(shown, 'event')} {'matches' if shown == 1 and not more else 'match'} "
        f"{found.filter}, up to event {found.watermark} "
        f"(replay them with --watermark {found.watermark})"
    )
    if found.over_cap:
        click.echo(f"over HOOKLATCH_REPLAY_BATCH_MAX ({found.cap}): narrow the filter")
    for row in found.sample:
        click.echo(_event_line(row))


@events.command("batch")
@click.argument("batch_id", type=int)
@click.option(
    "--cancel",
    is_flag=True,
    help="Stop it: events not reached are not replayed, and replays not started are cancelled.",
)
@click.option("--by", "requested_by", default=None, help="Who cancels (default: your user name).")
@click.pass_context
@friendly
def events_batch(ctx: click.Context, batch_id: int, cancel: bool, requested_by: str | None) -> None:
    """A bulk replay's progress, as JSON (or cancel it)."""
    from hooklatch.services import replays

    runtime = runtime_of(ctx)
    if cancel:
        echo_json(replays.cancel_bulk_replay(runtime, batch_id, actor=cli_actor(requested_by)))
    else:
        echo_json(replays.show_bulk_replay(runtime, batch_id))
