"""`hooklatch events`: stored events, their attempts and replays."""

from __future__ import annotations

import getpass
from typing import Any

import click

from hooklatch.cli.context import friendly, runtime_of
from hooklatch.cli.output import echo_json, emit
from hooklatch.events.models import STATUSES, Event
from hooklatch.events.serialize import MAX_LIST_LIMIT


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
    return (
        f"{row['id']:>8}  {row['status']:<9} {row['provider']:<8} {row['type']:<28} "
        f"{row['external_id']}  attempts={row['attempts']}  {row['received_at']}"
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
@click.argument("event_id", type=int)
@click.option("--reason", required=True, help="Why: recorded with the replay.")
@click.option("--by", "requested_by", default=None, help="Who asks (default: your user name).")
@click.pass_context
@friendly
def events_replay(ctx: click.Context, event_id: int, reason: str, requested_by: str | None) -> None:
    """Run the event's handlers again, whatever its state."""
    from hooklatch.events.replay import request_replay
    from hooklatch.events.serialize import describe_replay

    runtime = runtime_of(ctx)
    with runtime.session_factory.begin() as session:
        replay = request_replay(
            session,
            event_id,
            requested_by=requested_by or f"{getpass.getuser()} (cli)",
            reason=reason,
            now=runtime.clock(),
        )
        echo_json(describe_replay(replay))
