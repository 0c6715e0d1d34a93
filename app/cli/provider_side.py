"""`hooklatch endpoints credential|register|unregister|remove`: the provider's side of an
endpoint (hooklatch.services.provider_side), and how it is printed. Neither a credential
nor a signing secret is ever printed: a credential by its field names and fingerprint, a
secret by its fingerprint."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.credential_input import FILE_HELP, read_credential
from hooklatch.cli.output import echo_json, printable
from hooklatch.display import shown_time
from hooklatch.errors import HooklatchError, NotFound
from hooklatch.operations.provider_status import drift_texts
from hooklatch.providers.base import Provider
from hooklatch.providers.remote import Place

if TYPE_CHECKING:
    from hooklatch.runtime import Runtime

EVENT_TYPE_HELP = "An event type the provider is to send; repeat for several (none: every type)."
API_URL_HELP = (
    "The provider's API, where it is not the public one (GitHub Enterprise Server: "
    "https://HOST/api/v3)."
)
SCOPE_HELP = "Where GitHub keeps the hook: repos/OWNER/NAME or orgs/ORG."


# How the provider's side is printed.


def drift_lines(webhook: Mapping[str, Any] | None) -> list[str]:
    """One loud line per way the webhook at the provider differs from what hooklatch
    expects, and one for a look at it that failed."""
    out = [f"DRIFT: {text}" for text in drift_texts(webhook)]
    if webhook is not None and webhook["seen"]["error"]:
        seen = webhook["seen"]
        out.append(
            f"the webhook at the provider could not be read at {shown_time(seen['checked_at'])}: "
            f"{printable(seen['error'])}"
        )
    return out


def webhook_line(provider: str, webhook: Mapping[str, Any] | None) -> str:
    """What the provider holds for the endpoint, as last seen."""
    if webhook is None or webhook["hook_id"] is None:
        return f"webhook at {provider}: none registered or linked"
    seen = webhook["seen"]
    where = f" in {printable(webhook['scope'])}" if webhook["scope"] else ""
    line = f"webhook at {provider}: {printable(webhook['hook_id'])}{where}"
    if seen["checked_at"] is None or seen["url"] is None:
        return line + f", event types {_types(webhook['event_types'])} (as asked; not read back)"
    state = "enabled" if seen["enabled"] else "DISABLED"
    return (
        f"{line} -> {printable(seen['url'])}, event types {_types(seen['event_types'])}, "
        f"{state} (read {shown_time(seen['checked_at'])})"
    )


def credential_line(credential: Mapping[str, Any] | None) -> str:
    if credential is None:
        return "credential: none (hooklatch endpoints credential set ENDPOINT)"
    fields = ", ".join(credential["fields"])
    return (
        f"credential: {fields} (fingerprint {credential['fingerprint']}, "
        f"set {shown_time(credential['created_at'])})"
    )


def registered_lines(runtime: Runtime, data: Mapping[str, Any]) -> list[str]:
    """An endpoint just registered with its provider (``endpoint_with_provider_side``)."""
    provider, side = data["provider"], data["provider_side"]
    webhook = side["webhook"]
    seen = webhook["seen"]
    fingerprints = ", ".join(s["fingerprint"] for s in data["secrets"]) or "none"
    made = (
        f"hooklatch made and gave {provider}"
        if runtime.provider(provider).generates_secret
        else f"{provider} returned"
    )
    state = "enabled" if seen["enabled"] else "DISABLED"
    lines = [
        f"endpoint {data['id']} ({provider}, {printable(data['name'])})",
        f"registered with {provider}: {printable(webhook['hook_id'])} for "
        f"{printable(seen['url'] or data['url'])} ({_types(seen['event_types'])}), {state}",
        f"the signing secret {made} is stored (fingerprint {fingerprints}); it is never shown",
        credential_line(side["credential"]),
    ]
    return lines + drift_lines(webhook)


def _types(types: Sequence[str] | None) -> str:
    return ", ".join(printable(t) for t in types) if types else "every type"


def checked_provider_side(
    runtime: Runtime, endpoint_ref: str, *, check: bool
) -> tuple[dict[str, Any], list[str]]:
    """The endpoint's provider side, its webhook read back at the provider first (one API
    call) where it has a credential and a webhook and ``check``; with the lines that say
    its drift, or why it could not be read."""
    from hooklatch.services.provider_side import check_webhook

    side = shown_side(runtime, endpoint_ref)
    webhook = side["webhook"]
    failed = []
    if check and side["credential"] and webhook and webhook["hook_id"]:
        try:
            side = check_webhook(runtime, endpoint_ref)
        except (HooklatchError, LookupError) as exc:
            failed.append(f"the webhook at the provider could not be read: {printable(str(exc))}")
    return side, drift_lines(side["webhook"]) + failed


def shown_side(runtime: Runtime, endpoint_ref: str) -> dict[str, Any]:
    """``provider_side``, to be read by key."""
    from hooklatch.services.provider_side import provider_side

    return provider_side(runtime, endpoint_ref)


def add_registered(
    runtime: Runtime,
    provider: Provider,
    *,
    name: str,
    options: Mapping[str, str],
    event_types: Sequence[str],
    place: Place,
    file: TextIO | None,
    as_json: bool,
) -> None:
    """`endpoints add --register`: create the endpoint, store its credential and register
    its URL with the provider; print what the provider holds, never the secret."""
    from hooklatch.services.provider_side import NewRegistration
    from hooklatch.services.provider_side import add_registered as add

    values = read_credential(provider, file)  # asked before any transaction begins
    new = NewRegistration(provider.name, name, values, list(event_types), place, options)
    existed = _exists(runtime, name)
    try:
        data: dict[str, Any] = add(runtime, new, actor=cli_actor())
    except HooklatchError as exc:
        if existed or not _exists(runtime, name):
            raise
        raise click.ClickException(
            f"{exc}\nendpoint {name} was created with its credential, but {provider.name} "
            f"does not have its URL: it refuses every delivery until "
            f"`hooklatch endpoints register {name}` succeeds"
        ) from exc
    if as_json:
        echo_json(data)
        return
    for line in registered_lines(runtime, data):
        click.echo(line)


def _exists(runtime: Runtime, endpoint_ref: str) -> bool:
    from hooklatch.endpoints.service import get_endpoint

    with runtime.session_factory() as session:
        try:
            get_endpoint(session, endpoint_ref)
        except NotFound:
            return False
    return True


# Commands.


@click.group("credential")
def endpoints_credential() -> None:
    """The endpoint's credential for its provider's API (registering, reconciling)."""


@endpoints_credential.command("set")
@click.argument("endpoint")
@click.option("--credential-file", "file", type=click.File(), help=FILE_HELP)
@click.option("--api-url", help=API_URL_HELP)
@click.option("--scope", help=SCOPE_HELP)
@click.option("--hook-id", help="The provider's id of a webhook made by hand, to link it.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def credential_set(
    ctx: click.Context,
    endpoint: str,
    file: TextIO | None,
    api_url: str | None,
    scope: str | None,
    hook_id: str | None,
    as_json: bool,
) -> None:
    """Store ENDPOINT's credential, or replace it (a rotation). With --hook-id, --scope or
    --api-url, say where its webhook lives too (one made by hand, in the dashboard)."""
    from hooklatch.services.provider_side import set_credential

    runtime = runtime_of(ctx)
    before = shown_side(runtime, endpoint)
    provider = runtime.provider(_provider_of(runtime, endpoint))
    values = read_credential(provider, file)  # asked before any transaction begins
    place = None
    if (api_url, scope, hook_id) != (None, None, None):
        known = before["webhook"] or {}
        place = Place(
            api_url=api_url if api_url is not None else known.get("api_url"),
            scope=scope if scope is not None else known.get("scope"),
            hook_id=hook_id,
        )
    side: dict[str, Any] = set_credential(runtime, endpoint, values, actor=cli_actor(), place=place)
    if as_json:
        echo_json(side)
        return
    verb = "replaced" if before["credential"] else "set"
    click.echo(f"{endpoint}: credential {verb}")
    click.echo(credential_line(side["credential"]))
    if place is not None:
        click.echo(webhook_line(provider.name, side["webhook"]))


@endpoints_credential.command("show")
@click.argument("endpoint")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def credential_show(ctx: click.Context, endpoint: str, as_json: bool) -> None:
    """Its field names, fingerprint and when it was set; never a value."""
    shown = shown_side(runtime_of(ctx), endpoint)["credential"]
    if as_json:
        echo_json(shown)
    else:
        click.echo(credential_line(shown))


@endpoints_credential.command("remove")
@click.argument("endpoint")
@click.pass_context
@friendly
def credential_remove(ctx: click.Context, endpoint: str) -> None:
    """Forget ENDPOINT's credential: no more reconcile runs, and its webhook at the
    provider (if any) stays, out of hooklatch's reach."""
    from hooklatch.services.provider_side import remove_credential

    runtime = runtime_of(ctx)
    gone = shown_side(runtime, endpoint)["credential"]
    side: dict[str, Any] = remove_credential(runtime, endpoint, actor=cli_actor())
    fingerprint = gone["fingerprint"] if gone else "?"
    click.echo(f"{endpoint}: credential (fingerprint {fingerprint}) removed")
    webhook = side["webhook"]
    if webhook is not None and webhook["hook_id"] is not None:
        click.echo(
            f"the webhook {printable(webhook['hook_id'])} at the provider stays: remove it "
            "there by hand, or set a credential again and run `hooklatch endpoints unregister`"
        )


@click.command("register")
@click.argument("endpoint")
@click.option("--event-type", "event_types", multiple=True, help=EVENT_TYPE_HELP)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@friendly
def endpoints_register(
    ctx: click.Context, endpoint: str, event_types: tuple[str, ...], as_json: bool
) -> None:
    """Create ENDPOINT's webhook at its provider, through the credential it has; the
    signing secret is stored at once, never shown. Without --event-type: those asked for
    before, else every type."""
    from hooklatch.services.provider_side import register

    runtime = runtime_of(ctx)
    types = list(event_types) or None
    data: dict[str, Any] = register(runtime, endpoint, event_types=types, actor=cli_actor())
    if as_json:
        echo_json(data)
        return
    for line in registered_lines(runtime, data):
        click.echo(line)


@click.command("unregister")
@click.argument("endpoint")
@click.pass_context
@friendly
def endpoints_unregister(ctx: click.Context, endpoint: str) -> None:
    """Delete ENDPOINT's webhook at its provider; the endpoint itself stays."""
    from hooklatch.services.provider_side import unregister

    runtime = runtime_of(ctx)
    webhook = shown_side(runtime, endpoint)["webhook"] or {}
    unregister(runtime, endpoint, actor=cli_actor())
    hook_id = printable(str(webhook.get("hook_id")))
    click.echo(f"{endpoint}: webhook {hook_id} is no longer at {_provider_of(runtime, endpoint)}")


@click.command("remove")
@click.argument("endpoint")
@click.option(
    "--remote/--keep-remote",
    default=None,
    help="Also delete its webhook at the provider, or leave it there (asked when neither "
    "is given and the endpoint is registered).",
)
@click.option("--yes", is_flag=True, help="Do not ask before deleting.")
@click.pass_context
@friendly
def endpoints_remove(ctx: click.Context, endpoint: str, remote: bool | None, yes: bool) -> None:
    """Delete ENDPOINT and every event it stored; with --remote, its webhook at the
    provider first."""
    from hooklatch.services.provider_side import is_registered, remove_endpoint

    runtime = runtime_of(ctx)
    provider = _provider_of(runtime, endpoint)
    registered = is_registered(runtime, endpoint)
    if registered and remote is None:
        if yes or not sys.stdin.isatty():
            raise click.UsageError(
                f"{endpoint} is registered at {provider}: give --remote to delete its webhook "
                f"there too, or --keep-remote to leave it ({provider} would go on sending to "
                "a URL that answers 404)"
            )
        remote = click.confirm(f"Remove the webhook at {provider} too?", default=None)
    if not yes:
        click.confirm(f"Delete endpoint {endpoint} and every event it stored?", abort=True)
    removed = remove_endpoint(runtime, endpoint, remote=bool(remote), actor=cli_actor())
    click.echo(f"endpoint {removed['id']} ({printable(str(removed['name']))}) removed")
    if removed["webhook_removed"]:
        click.echo(f"its webhook at {provider} removed")
    elif registered:
        click.echo(f"its webhook at {provider} stays, sending to a URL that answers 404")


def _provider_of(runtime: Runtime, endpoint_ref: str) -> str:
    from hooklatch.endpoints.service import get_endpoint

    with runtime.session_factory() as session:
        return get_endpoint(session, endpoint_ref).provider
