"""`hooklatch ordering`: how an endpoint's events of one key run, the keys that are
blocked, and releasing a parked key. (`hooklatch keys` is about the encryption keys.)"""

from __future__ import annotations

from typing import Any

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.output import echo_json, emit, printable
from hooklatch.endpoints.ordering import DEAD_POLICIES, POLICIES


@click.group()
def ordering() -> None:
    """Per-key ordering: an endpoint's settings, blocked keys, releasing a parked key."""


@ordering.command("set")
@click.argument("endpoint")
@click.option("--policy", type=click.Choice(POLICIES), help="How events of one key run.")
@click.option(
    "--dead",
    type=click.Choice(DEAD_POLICIES),
    help="Under fifo, what a dead event does to its key: park it until someone acts, or "
    "release it at once.",
)
@click.option(
    "--hold",
    "hold_seconds",
    type=int,
    metavar="SECONDS",
    help="fifo only: hold keyed events this long and run a key's events in provider-time "
    "order (0: no hold).",
)
@click.option(
    "--key-path",
    metavar="PATH",
    help="Dotted paths into the payload (several separated by commas, the first present "
    "wins) that replace the provider's key: data.object.metadata.account_id.",
)
@click.option("--provider-key", is_flag=True, help="Key events by the provider's key again.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def ordering_set(
    ctx: click.Context,
    endpoint: str,
    policy: str | None,
    dead: str | None,
    hold_seconds: int | None,
    key_path: str | None,
    provider_key: bool,
    as_json: bool,
) -> None:
    """Change ENDPOINT's ordering (by id or name); what is not given stays as it is. Events
    stored from now on are keyed by the new settings."""
    from hooklatch.services.ordering import change_endpoint_ordering

    if key_path is not None and provider_key:
        raise click.UsageError("give --key-path or --provider-key, not both")
    if provider_key:
        key_path = ""
    if policy is None and dead is None and hold_seconds is None and key_path is None:
        raise click.UsageError(
            "give --policy, --dead, --hold, --key-path or --provider-key "
            "(`hooklatch ordering show` shows the settings)"
        )
    change = change_endpoint_ordering(
        runtime_of(ctx),
        endpoint,
        actor=cli_actor(),
        policy=policy,
        dead=dead,
        hold_seconds=hold_seconds,
        key_path=key_path,
    )
    _show(change.ordering, as_json=as_json, note="" if change.changed else " (unchanged)")


@ordering.command("show")
@click.argument("endpoint")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def ordering_show(ctx: click.Context, endpoint: str, as_json: bool) -> None:
    """ENDPOINT's ordering settings."""
    from hooklatch.services.ordering import show_ordering

    _show(show_ordering(runtime_of(ctx), endpoint), as_json=as_json)


def _show(data: dict[str, Any], *, as_json: bool, note: str = "") -> None:
    if as_json:
        echo_json(data)
        return
    dead = {
        "park": "parks its key until a replay succeeds or the key is released",
        "release": "releases its key at once",
    }.get(data["dead"], data["dead"])
    click.echo(f"endpoint {data['endpoint_id']} ({printable(data['name'])}){note}")
    click.echo(f"  policy:     {data['policy']}")
    click.echo(
        f"  dead event: {dead}" + ("" if data["policy"] == "fifo" else " (applies under fifo)")
    )
    click.echo(f"  hold:       {data['hold_seconds']} s")
    key = printable(data["key_path"]) if data["key_path"] else "the provider's"
    click.echo(f"  key:        {key}")


@ordering.command("blocked")
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def ordering_blocked(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Keys whose next event cannot run: parked behind a dead event, or failing at their
    first event; longest blocked first."""
    from hooklatch.ordering.service import blocked_page

    with runtime_of(ctx).session_factory() as session:
        found, total = blocked_page(session, limit=limit)
    rows = [b.as_json() for b in found]
    if not as_json and not rows:
        click.echo("no blocked keys")
        return
    emit(rows, as_json=as_json, line=blocked_line)
    if not as_json and total > len(rows):
        click.echo(f"... and {total - len(rows)} more (--limit)")


def blocked_line(row: dict[str, Any]) -> str:
    """One blocked key (BlockedKey.as_json) on a line; the key and the error come from
    payloads and handlers, so they are printed escaped."""
    return (
        f"{row['endpoint_id']}  key {printable(row['key'])}  event {row['event_id']}  "
        f"since {row['since'] or 'unknown'}  {row['waiting']} waiting  {printable(row['why'])}"
    )


@ordering.command("release")
@click.argument("endpoint")
@click.argument("key")
@click.option("--reason", required=True, help="Why: recorded in the audit log.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def ordering_release(
    ctx: click.Context, endpoint: str, key: str, reason: str, as_json: bool
) -> None:
    """Let KEY of ENDPOINT, parked by a dead event, go on: its next event runs at once. The
    dead event stays dead (`hooklatch events replay` runs it again)."""
    from hooklatch.services.ordering import release_parked_key

    released = release_parked_key(runtime_of(ctx), endpoint, key, actor=cli_actor(), reason=reason)
    if as_json:
        echo_json(released)
        return
    click.echo(
        f"key {printable(key)} of endpoint {released['endpoint_id']} released; event "
        f"{released['dead_event']} stays dead (replay it to run it again)"
    )
