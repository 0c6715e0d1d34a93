"""`hooklatch reconcile ENDPOINT`: one run now, in this process, of what the endpoint's
provider never delivered (hooklatch.reconcile.runs), and what it asked, found and did."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.output import echo_json, printable
from hooklatch.display import counted, shown_time

if TYPE_CHECKING:
    from hooklatch.runtime import Runtime

# Exit codes beyond 1 (the run could not start: another holds it, no credential):
# 2 the run was cut short (the next run resumes where it stopped), 3 it failed.
CUT_SHORT_EXIT = 2
FAILED_EXIT = 3
DURATION = re.compile(r"(\d+)\s*([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
# Further back than any provider's API reaches, and near enough for a date to hold.
LONGEST = timedelta(days=36500)
# Ids printed of a run's sample; --json prints all it kept.
SAMPLE_SHOWN = 10


class Since(click.ParamType):
    """An ISO 8601 time (UTC where it names no zone), or a duration back from now:
    90m, 2h, 3d. Given as text: the command resolves it against its runtime's clock."""

    name = "ISO-TIME|DURATION"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime | timedelta:
        if isinstance(value, datetime | timedelta):
            return value
        text = str(value).strip()
        matched = DURATION.fullmatch(text)
        if matched:
            try:
                duration = timedelta(**{UNITS[matched.group(2)]: int(matched.group(1))})
            except OverflowError:
                duration = LONGEST * 2
            if duration > LONGEST:
                self.fail(f"{text!r} is too far back (100 years at most)", param, ctx)
            return duration
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is neither an ISO time nor a duration like 2h or 3d", param, ctx)
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.command("reconcile")
@click.argument("endpoint")
@click.option(
    "--since",
    type=Since(),
    help="Start here instead of the endpoint's cursor: an ISO time or a duration back from "
    "now (2h, 3d). Never past what the provider's API keeps.",
)
@click.option("--dry-run", is_flag=True, help="Say what would be fetched or redelivered only.")
@click.option(
    "--all",
    "everything",
    is_flag=True,
    help="Where events are fetched (Stripe): every event since, not only those whose "
    "delivery has not succeeded.",
)
@click.option("--json", "as_json", is_flag=True, help="The run as one JSON object.")
@click.pass_context
@friendly
def reconcile(
    ctx: click.Context,
    endpoint: str,
    since: datetime | timedelta | None,
    dry_run: bool,
    everything: bool,
    as_json: bool,
) -> None:
    """Recover now what ENDPOINT's provider never delivered: fetch the missing events
    (Stripe) or ask the provider to send them again (GitHub). Exits 2 when the run was
    cut short (a budget, a rate limit, an API error: the next run resumes), 3 when it
    failed, 1 when it could not start."""
    from hooklatch.reconcile.runs import Busy, RunRequest
    from hooklatch.services.provider_side import reconcile_now

    runtime = runtime_of(ctx)
    start = runtime.clock() - since if isinstance(since, timedelta) else since
    request = RunRequest(
        trigger="cli",
        requested_by=cli_actor(),
        dry_run=dry_run,
        since=start,
        everything=everything,
    )
    try:
        run: dict[str, Any] = reconcile_now(runtime, endpoint, request)
    except Busy as exc:
        raise click.ClickException(f"{exc}: try again once it ends") from exc
    if as_json:
        echo_json(run)
    else:
        for line in run_lines(run, family=_family(runtime, endpoint)):
            click.echo(line)
    if run["status"] == "cut_short":
        ctx.exit(CUT_SHORT_EXIT)
    if run["status"] == "failed":
        ctx.exit(FAILED_EXIT)


def run_lines(run: Mapping[str, Any], *, family: str) -> list[str]:
    """A run as a person reads it: what it asked, found and did, and how it ended."""
    dry = run["dry_run"]
    since = shown_time(run["since"]) if run["since"] else "?"
    kind = "every event" if run["everything"] else "what was not delivered"
    out = [
        f"reconcile run {run['id']} of {run['endpoint_id']}{' (dry run)' if dry else ''}",
        f"asked:  {kind} since {since}: {counted(run['requests'], 'request')}, "
        f"{counted(run['pages'], 'page')}",
        f"found:  {run['listed']} listed, {run['missing']} missing, {run['present']} present",
    ]
    verb = "fetch" if family == "pull" else "redeliver"
    if dry:
        out.append(f"would {verb}: {run['missing']}{_sample(run['sample'])}")
    else:
        did = run["fetched"] if family == "pull" else run["redeliveries"]
        done = "fetched" if family == "pull" else "redeliveries asked for"
        out.append(f"did:    {did} {done}{_sample(run['sample'])}")
        out.append(f"cursor: {_when(run['cursor_before'])} -> {_when(run['cursor_after'])}")
    if run["api_errors"]:
        out.append(f"API errors: {run['api_errors']}")
    out.append(_ended(run))
    return out


def _ended(run: Mapping[str, Any]) -> str:
    error = printable(run["error"]) if run["error"] else None
    if run["status"] == "cut_short":
        return (
            f"ended:  CUT SHORT ({run['stop_reason']}): {error}; the next run resumes where "
            "this one stopped"
        )
    if run["status"] == "failed":
        return f"ended:  FAILED: {error}"
    return f"ended:  {run['status']}" + (f" (note: {error})" if error else "")


def _sample(ids: list[str]) -> str:
    if not ids:
        return ""
    shown = ", ".join(printable(i) for i in ids[:SAMPLE_SHOWN])
    if len(ids) > SAMPLE_SHOWN:
        shown += f", ... ({len(ids) - SAMPLE_SHOWN} more kept: --json lists them)"
    return f" ({shown})"


def _when(value: str | None) -> str:
    return shown_time(value) if value else "none"


def _family(runtime: Runtime, endpoint_ref: str) -> str:
    """push or pull: how the endpoint's provider recovers an event (no API call)."""
    from hooklatch.endpoints.service import get_endpoint
    from hooklatch.reconcile.credentials import reach

    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        provider = runtime.provider(endpoint.provider)
        return reach(session, endpoint, provider, box=runtime.box).api.family
