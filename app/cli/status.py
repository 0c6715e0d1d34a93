"""`hooklatch status`: is everything running, and is anything piling up? One screen."""

from __future__ import annotations

from typing import Any

import click
from sqlalchemy.exc import SQLAlchemyError

from hooklatch.cli.context import friendly, runtime_of
from hooklatch.cli.ordering import blocked_line
from hooklatch.cli.output import echo_json, printable
from hooklatch.cli.provider_side import webhook_line
from hooklatch.display import counted, shown_age, shown_time
from hooklatch.logs import one_line
from hooklatch.operations.provider_status import drift_texts

# Exit codes: 0 all well, 1 the database could not be read (or a setting is wrong),
# 2 read, but there are problems: a relay or a worker is missing (events would be stored
# and never handled), a provider is not sending every event (a webhook that drifted,
# a reconcile that failed or whose credential is refused), or a destination is not getting
# its forwards (some are dead, or one not paused has waited over 10 minutes).
PROBLEMS = 2
# The characters of a destination's last error shown (--json has all of it).
ERROR_SHOWN = 200


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="The same figures as one JSON object.")
@click.pass_context
@friendly
def status(ctx: click.Context, as_json: bool) -> None:
    """Processes alive, events waiting, dead and due, refusals, cleanup's last pass, the
    ordering keys that are blocked, each endpoint's reconcile and webhook at its
    provider, and each destination's forwards waiting and dead."""
    from hooklatch.operations.status import read_status, unhealthy

    runtime = runtime_of(ctx)
    try:
        figures = read_status(runtime)
    except SQLAlchemyError as exc:
        raise click.ClickException(f"the database cannot be read: {one_line(exc)}") from exc
    problems = unhealthy(figures)
    if as_json:
        echo_json({**figures, "problems": problems})
    else:
        for line in lines(figures, problems):
            click.echo(line)
    if problems:
        ctx.exit(PROBLEMS)


def lines(figures: dict[str, Any], problems: list[str]) -> list[str]:
    events, outbox = figures["events"], figures["outbox"]
    out = ["processes:"]
    if figures["embedded"]:
        out.append("  embedded: handlers run inside the web processes (no REDIS_URL)")
    for p in figures["processes"]:
        state = "alive" if p["alive"] else "SILENT"
        out.append(
            f"  {p['kind']:<7} {p['hostname']} pid {p['pid']:<7} "
            f"last beat {p['last_beat_seconds']:g} s ago  {state}"
        )
    if not figures["processes"]:
        out.append(
            "  none has beaten: start the web process"
            if figures["embedded"]
            else "  none has beaten: start `hooklatch relay` and `hooklatch worker`"
        )
    out += [
        f"events:  {events['pending']} pending{_oldest(events['oldest_pending_seconds'])}, "
        f"{events['retries_due']} retries due, {events['dead']} dead",
        f"outbox:  {outbox['waiting']} waiting, {outbox['handed_out']} handed to jobs"
        f"{_oldest(outbox['oldest_seconds'])}",
    ]
    refused = figures["refusals_last_hour"]
    out.append(
        "refused: "
        + (
            ", ".join(f"{r['reason']} {r['count']}" for r in refused)
            + " (reasons seen in the last hour, counted since their first refusal)"
            if refused
            else "nothing in the last hour"
        )
    )
    done = figures["cleanup"]
    out.append(
        f"cleanup: last pass {done['finished_at']}: {done['pruned']} payloads pruned, "
        f"{counted(done['deleted'], 'event')} deleted in {done['seconds']:.2f} s"
        f"{_behind(done['oldest_expired_seconds'])}"
        if done
        else "cleanup: last pass never (no running relay or dispatcher has finished one)"
    )
    out += _blocked(figures["blocked_keys_count"], figures["blocked_keys"])
    out += _reconcile(figures["provider_sides"])
    out += _forwarding(figures["destinations"])
    out += [f"PROBLEM: {problem}" for problem in problems]
    return out


def _blocked(total: int, shown: list[dict[str, Any]]) -> list[str]:
    if not total:
        return ["blocked: no ordering key"]
    more = f", the {len(shown)} longest blocked:" if total > len(shown) else ":"
    out = [f"blocked: {total} ordering keys (`hooklatch ordering blocked` lists them){more}"]
    return out + [f"  {blocked_line(row)}" for row in shown]


def _reconcile(sides: list[dict[str, Any]]) -> list[str]:
    """Each endpoint with a credential for its provider's API: its last reconcile run,
    cursor, API errors, and what the provider held for its webhook when last read, with
    any drift."""
    if not sides:
        return ["reconcile: no endpoint has a credential for its provider's API"]
    out = ["reconcile:"]
    for side in sides:
        run, errors = side["last_run"], side["errors_total"]
        if run is None:
            last = "no run yet"
        else:
            ended = run["status"] + (f" ({run['stop_reason']})" if run["stop_reason"] else "")
            dry = " (dry run)" if run["dry_run"] else ""
            when = shown_time(run["started_at"])
            last = f"last run {when}{dry}: {ended}, {run['missing']} missing found"
        cursor = side["cursor_age_seconds"]
        ages = f"cursor {shown_age(cursor)} old" if cursor is not None else "no cursor yet"
        failures = ", ".join(f"{reason} {n}" for reason, n in sorted(errors.items())) or "none"
        out.append(
            f"  {side['endpoint_id']} {printable(side['name'])} ({side['provider']}): {last}; "
            f"{ages}; API errors: {failures}"
        )
        out += _webhook(side["provider"], side["webhook"])
    return out


def _forwarding(destinations: list[dict[str, Any]]) -> list[str]:
    """Each destination: paused or not, its forwards waiting (and the oldest's age) and
    dead, what it took, and its last error on one line, escaped."""
    if not destinations:
        return ["forwarding: no destination"]
    out = ["forwarding:"]
    for d in destinations:
        kind = printable(d["kind"]) + (", PAUSED" if d["paused"] else "")
        oldest = d["oldest_pending_seconds"]
        # None: nothing waits (a forward written this instant is 0 s old, and shown).
        shown = f" (oldest {shown_age(oldest)})" if oldest is not None else ""
        waiting = f"{d['pending']} pending{shown}"
        line = (
            f"  {printable(d['name'])} ({kind}): {waiting}, {d['dead']} dead, "
            f"{d['delivered']} delivered, {counted(d['failed_attempts'], 'failed attempt')}"
        )
        if d["last_error"]:
            when = shown_time(d["last_failed_at"]) if d["last_failed_at"] else "?"
            line += f"; last error {when}: {_cut(printable(d['last_error']))}"
        out.append(line)
    return out


def _cut(text: str, most: int = ERROR_SHOWN) -> str:
    return text if len(text) <= most else text[: most - 1] + "\N{HORIZONTAL ELLIPSIS}"


def _webhook(provider: str, webhook: dict[str, Any] | None) -> list[str]:
    """A registered or linked webhook: what the provider held for it when last read, then
    how it drifted, or that no drift was seen, and a look at it that failed."""
    if webhook is None or webhook["hook_id"] is None:
        return []
    drift = drift_texts(webhook)
    held = f"    {webhook_line(provider, webhook)}"
    out = [held, f"    DRIFT: {'; '.join(drift)}"] if drift else [f"{held}; no drift seen"]
    if webhook["seen"]["error"]:
        out.append(f"    it could not be read: {printable(webhook['seen']['error'])}")
    return out


def _oldest(seconds: float | None) -> str:
    return "" if seconds is None else f" (oldest {seconds:g} s)"


def _behind(seconds: float) -> str:
    return f"; the oldest expired row is {seconds:.0f} s past its clock" if seconds else ""
