"""`hooklatch destinations`: the systems processed events are forwarded to
(hooklatch.services.forwarding), and how they are printed. A destination's secret settings
(a broker URL with its password, a signing secret) are never an option's value
(hooklatch.cli.setting_input), and never printed: only what every face shows of them
(``connection``) and their fingerprint."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO, TypeVar

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.output import echo_json, printable
from hooklatch.cli.setting_input import (
    SECRETS_FILE_HELP,
    SECRETS_STDIN_HELP,
    SET_HELP,
    read_settings,
)
from hooklatch.forwarding.destinations import UNCHANGED, Filter, Keep, ReplaySet
from hooklatch.forwarding.models import DEAD, STATUSES

TYPES_HELP = "Event types to forward, as comma-separated globs (invoice.*,charge.failed)."
ENDPOINT_HELP = "Forward only the events of this endpoint (id or name)."
PROVIDER_HELP = "Forward only the events of this provider."
RATE_HELP = "Forward at most N events a second."
Command = TypeVar("Command", bound=Callable[..., Any])


# How a destination is printed.


def destination_lines(shown: Mapping[str, Any]) -> list[str]:
    """A destination as ``described`` gives it: never a secret, its fingerprint instead."""
    settings = ", ".join(f"{k}={printable(v)}" for k, v in sorted(shown["settings"].items()))
    lines = [
        f"destination {shown['id']} ({shown['kind']}, {printable(shown['name'])})",
        f"connection: {printable(shown['connection'])} (secrets' fingerprint "
        f"{shown['fingerprint']})",
        f"settings: {settings or 'none'}",
        f"forwards: {filter_text(shown['filter'])}",
        f"rate limit: {rate_text(shown['rate_limit'])}",
        f"paused: {'yes' if shown['paused'] else 'no'}",
    ]
    forwards = shown.get("forwards")
    if forwards is not None:
        lines.append(
            f"pending {forwards['pending']} (oldest {_age(forwards['oldest_pending_seconds'])}), "
            f"dead {forwards['dead']}, delivered {forwards['delivered']}, "
            f"failed attempts {forwards['failed_attempts']}"
        )
        if forwards["last_error"]:
            lines.append(f"last error: {printable(forwards['last_error'])}")
    return lines


def filter_text(chosen: Mapping[str, Any]) -> str:
    parts = []
    if chosen["endpoint_id"]:
        parts.append(f"endpoint {chosen['endpoint_id']}")
    if chosen["provider"]:
        parts.append(f"provider {printable(chosen['provider'])}")
    if chosen["types"]:
        parts.append("types " + ",".join(printable(t) for t in chosen["types"]))
    return ", ".join(parts) or "every event"


def rate_text(rate_limit: float | None) -> str:
    return "none" if rate_limit is None else f"{rate_limit:g} a second"


def _age(seconds: float) -> str:
    return f"{seconds:.0f}s" if seconds else "-"


LIST_HEADER = ("NAME", "KIND", "CONNECTION", "FILTER", "PAUSED", "PENDING", "DEAD", "OLDEST")


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per destination, columns as wide as their widest cell."""
    cells = [(*LIST_HEADER, "DELIVERED")]
    for row in rows:
        forwards = row["forwards"]
        cells.append(
            (
                printable(row["name"]),
                row["kind"],
                printable(row["connection"]),
                filter_text(row["filter"]),
                "yes" if row["paused"] else "no",
                str(forwards["pending"]),
                str(forwards["dead"]),
                _age(forwards["oldest_pending_seconds"]),
                str(forwards["delivered"]),
            )
        )
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]


def _types(text: str | None) -> tuple[str, ...]:
    return tuple(glob.strip() for glob in (text or "").split(",") if glob.strip())


def _rate(rate_limit: float | None) -> float | None:
    if rate_limit is not None and not math.isfinite(rate_limit):
        raise click.BadParameter("a rate limit is a finite number", param_hint="--rate-limit")
    return rate_limit


def _moment(text: str | None, name: str) -> datetime | None:
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            "an ISO 8601 time (2026-11-25T08:00:00Z)", param_hint=name
        ) from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _print(shown: Mapping[str, Any], as_json: bool) -> None:
    if as_json:
        echo_json(shown)
        return
    for line in destination_lines(shown):
        click.echo(line)


# Commands.


@click.group()
def destinations() -> None:
    """Where processed events are forwarded: HTTP, NATS, RabbitMQ, Redis streams."""


def _settings_options(command: Command) -> Command:
    """--set, --secrets-from-stdin and --secrets-file: a kind's settings, as add and
    change take them."""
    for option in reversed(
        (
            click.option("--set", "sets", multiple=True, metavar="NAME=VALUE", help=SET_HELP),
            click.option("--secrets-from-stdin", is_flag=True, help=SECRETS_STDIN_HELP),
            click.option("--secrets-file", type=click.File(), help=SECRETS_FILE_HELP),
        )
    ):
        command = option(command)
    return command


@destinations.command("add")
@click.argument("name")
@click.option("--kind", "kind_name", required=True, help="http, nats, rabbitmq or redis.")
@click.option("--endpoint", help=ENDPOINT_HELP)
@click.option("--provider", help=PROVIDER_HELP)
@click.option("--types", help=TYPES_HELP)
@click.option("--rate-limit", type=float, metavar="N", help=RATE_HELP)
@_settings_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def destinations_add(
    ctx: click.Context,
    name: str,
    kind_name: str,
    endpoint: str | None,
    provider: str | None,
    types: str | None,
    rate_limit: float | None,
    sets: tuple[str, ...],
    secrets_from_stdin: bool,
    secrets_file: TextIO | None,
    as_json: bool,
) -> None:
    """Forward the events processed from now on that match (every one, without --endpoint,
    --provider or --types) to a new destination NAME."""
    from hooklatch.services.forwarding import add_destination

    given = read_settings(
        kind_name, sets, secrets_from_stdin, secrets_file
    )  # before any transaction
    shown = add_destination(
        runtime_of(ctx),
        name=name,
        kind=kind_name,
        given=given,
        selects=Filter(endpoint or None, provider or None, _types(types)),
        rate_limit=_rate(rate_limit),
        actor=cli_actor(),
    )
    _print(shown, as_json)


@destinations.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def destinations_list(ctx: click.Context, as_json: bool) -> None:
    """Every destination with what it has waiting, dead and delivered."""
    from hooklatch.services.forwarding import list_destinations

    rows = list_destinations(runtime_of(ctx))
    if as_json:
        echo_json(rows)
    elif not rows:
        click.echo("no destinations (hooklatch destinations add NAME --kind KIND)")
    else:
        for line in _table(rows):
            click.echo(line)


@destinations.command("show")
@click.argument("destination")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def destinations_show(ctx: click.Context, destination: str, as_json: bool) -> None:
    """DESTINATION (id or name), with what it did and has waiting."""
    from hooklatch.services.forwarding import show_destination

    _print(show_destination(runtime_of(ctx), destination), as_json)


@destinations.command("change")
@click.argument("destination")
@click.option(
    "--new-settings",
    is_flag=True,
    help="Give new settings, all of them, as add takes them (the secret ones at hidden "
    "prompts); implied by --set, --secrets-from-stdin and --secrets-file.",
)
@_settings_options
@click.option("--endpoint", help=ENDPOINT_HELP + ' "" for any.')
@click.option("--provider", help=PROVIDER_HELP + ' "" for any.')
@click.option("--types", help=TYPES_HELP + ' "" for every type.')
@click.option("--rate-limit", type=float, metavar="N", help=RATE_HELP)
@click.option("--no-rate-limit", is_flag=True, help="Forward as fast as it takes them.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def destinations_change(
    ctx: click.Context,
    destination: str,
    new_settings: bool,
    sets: tuple[str, ...],
    secrets_from_stdin: bool,
    secrets_file: TextIO | None,
    endpoint: str | None,
    provider: str | None,
    types: str | None,
    rate_limit: float | None,
    no_rate_limit: bool,
    as_json: bool,
) -> None:
    """Change DESTINATION's settings (a rotated password, another URL), which events go
    there, or its rate limit. Forwards waiting go out with the new settings."""
    from hooklatch.services.forwarding import change_destination, show_destination

    if rate_limit is not None and no_rate_limit:
        raise click.UsageError("give --rate-limit or --no-rate-limit, not both")
    runtime = runtime_of(ctx)
    before: dict[str, Any] = show_destination(runtime, destination)
    given = None
    if new_settings or sets or secrets_from_stdin or secrets_file is not None:
        given = read_settings(before["kind"], sets, secrets_from_stdin, secrets_file)
    selects = None
    if (endpoint, provider, types) != (None, None, None):
        known = before["filter"]
        selects = Filter(
            (known["endpoint_id"] if endpoint is None else endpoint) or None,
            (known["provider"] if provider is None else provider) or None,
            tuple(known["types"]) if types is None else _types(types),
        )
    # None: no limit.
    rate: float | Keep | None = UNCHANGED
    if no_rate_limit:
        rate = None
    elif rate_limit is not None:
        rate = _rate(rate_limit)
    if given is None and selects is None and rate is UNCHANGED:
        raise click.UsageError("nothing to change: see hooklatch destinations change --help")
    shown = change_destination(
        runtime, destination, given=given, selects=selects, rate_limit=rate, actor=cli_actor()
    )
    _print(shown, as_json)


def _pausing(paused: bool, description: str) -> click.Command:
    """`destinations pause` or `destinations resume`."""

    @click.command("pause" if paused else "resume", help=description)
    @click.argument("destination")
    @click.pass_context
    @friendly
    def command(ctx: click.Context, destination: str) -> None:
        from hooklatch.services.forwarding import pause_destination

        shown: dict[str, Any] = pause_destination(
            runtime_of(ctx), destination, paused=paused, actor=cli_actor()
        )
        state = "paused" if paused else "resumed"
        if not shown["changed"]:
            state = f"was {'paused' if paused else 'not paused'} already"
        click.echo(f"destination {shown['id']} ({printable(shown['name'])}) {state}")

    return command


destinations.add_command(
    _pausing(True, "Send nothing to DESTINATION; its forwards keep being recorded.")
)
destinations.add_command(
    _pausing(False, "Send to DESTINATION again: the oldest forwards first, under its rate limit.")
)


@destinations.command("remove")
@click.argument("destination")
@click.option("--yes", is_flag=True, help="Do not ask before removing.")
@click.pass_context
@friendly
def destinations_remove(ctx: click.Context, destination: str, yes: bool) -> None:
    """Remove DESTINATION and its forwards: those waiting are never sent."""
    from hooklatch.services.forwarding import remove_destination, show_destination

    runtime = runtime_of(ctx)
    if not yes:
        shown: dict[str, Any] = show_destination(runtime, destination)
        pending = shown["forwards"]["pending"]
        click.confirm(
            f"Remove destination {printable(destination)} and its forwards "
            f"({pending} waiting, never to be sent)?",
            abort=True,
        )
    removed: dict[str, Any] = remove_destination(runtime, destination, actor=cli_actor())
    click.echo(f"destination {removed['id']} ({printable(removed['name'])}) removed")


@destinations.command("replay")
@click.argument("destination")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(STATUSES),
    help=f"Forwards in this state; repeat for several (default: {DEAD}).",
)
@click.option("--since", help="Of events received since (ISO 8601).")
@click.option("--until", help="Of events received before (ISO 8601).")
@click.option("--type", "type_glob", help="Of event types matching this glob (invoice.*).")
@click.option(
    "--event",
    "event_ids",
    multiple=True,
    type=click.IntRange(min=1),
    help="Of this event (hooklatch's event id); repeat for several.",
)
@click.option("--dry-run", is_flag=True, help="Count them, send nothing.")
@click.option("--reason", help="Why: recorded with the replay (required unless --dry-run).")
@click.option("--by", "requested_by", default=None, help="Who asks (default: your user name).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def destinations_replay(
    ctx: click.Context,
    destination: str,
    statuses: tuple[str, ...],
    since: str | None,
    until: str | None,
    type_glob: str | None,
    event_ids: tuple[int, ...],
    dry_run: bool,
    reason: str | None,
    requested_by: str | None,
    as_json: bool,
) -> None:
    """Send DESTINATION's forwards again (its dead ones, unless --status says otherwise),
    with their own keys, oldest first, under its rate limit."""
    from hooklatch.services.forwarding import replay_forwards

    if not dry_run and not reason:
        raise click.UsageError("--reason is required (or --dry-run)")
    chosen = ReplaySet(
        statuses=statuses or (DEAD,),
        since=_moment(since, "--since"),
        until=_moment(until, "--until"),
        type_glob=type_glob,
        event_ids=event_ids,
    )
    summary: dict[str, Any] = replay_forwards(
        runtime_of(ctx),
        destination,
        chosen,
        dry_run=dry_run,
        actor=cli_actor(requested_by),
        reason=reason,
    )
    if as_json:
        echo_json(summary)
        return
    capped = " (capped: replay again for the rest)" if summary["capped"] else ""
    name = printable(str(summary["destination"]))
    if dry_run:
        click.echo(f"{name}: {summary['matched']} forwards match{capped}; dry run, none replayed")
    else:
        click.echo(f"{name}: {summary['matched']} matched, {summary['replayed']} replayed{capped}")
