"""`hooklatch endpoints`: the URLs registered with providers, and their secrets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TextIO

import click

from hooklatch.cli.context import cli_actor, friendly, runtime_of
from hooklatch.cli.credential_input import FILE_HELP as CREDENTIAL_FILE_HELP
from hooklatch.cli.output import echo_json, emit
from hooklatch.cli.provider_side import (
    API_URL_HELP,
    EVENT_TYPE_HELP,
    SCOPE_HELP,
    add_registered,
    checked_provider_side,
    endpoints_credential,
    endpoints_register,
    endpoints_remove,
    endpoints_unregister,
)
from hooklatch.cli.secret_input import FILE_HELP, VALUE_HELP, prompt_secret, read_secrets
from hooklatch.endpoints import changes
from hooklatch.endpoints.models import Endpoint
from hooklatch.providers.remote import Place

if TYPE_CHECKING:
    from hooklatch.runtime import Runtime


@click.group()
def endpoints() -> None:
    """The URLs you register with providers."""


def _endpoint_json(
    runtime: Runtime, endpoint: Endpoint, secrets: list[str] | None = None
) -> dict[str, Any]:
    from hooklatch.endpoints.serialize import describe_endpoint

    data = describe_endpoint(endpoint, public_url=runtime.settings.public_url)
    if secrets is not None:
        data["secret_values"] = [*secrets]
    return data


@endpoints.command("add")
@click.argument("provider")
@click.option("--name", required=True, help="A unique name for the endpoint.")
@click.option("--secret", "values", multiple=True, help=VALUE_HELP + " Repeat for several.")
@click.option("--secret-file", "files", multiple=True, type=click.File(), help=FILE_HELP)
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A provider option (see docs/plugins.md); repeat for several. A secret option "
    "left out (Meta's verify_token) is asked for at a hidden prompt.",
)
@click.option(
    "--register",
    is_flag=True,
    help="Also create the webhook at PROVIDER through its API, with a credential from "
    "--credential-file or hidden prompts. The signing secret is stored, never shown.",
)
@click.option("--event-type", "event_types", multiple=True, help=EVENT_TYPE_HELP)
@click.option("--api-url", help=API_URL_HELP)
@click.option("--scope", help=SCOPE_HELP)
@click.option("--credential-file", type=click.File(), help=CREDENTIAL_FILE_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (id, url, secrets).")
@click.pass_context
@friendly
def endpoints_add(
    ctx: click.Context,
    provider: str,
    name: str,
    values: tuple[str, ...],
    files: tuple[TextIO, ...],
    options: tuple[str, ...],
    register: bool,
    event_types: tuple[str, ...],
    api_url: str | None,
    scope: str | None,
    credential_file: TextIO | None,
    as_json: bool,
) -> None:
    """Create an endpoint and print the URL to give PROVIDER; with --register, give it to
    PROVIDER through its API."""
    from hooklatch.endpoints.service import create_endpoint

    runtime = runtime_of(ctx)
    plugin = runtime.provider(provider)
    if register and (values or files):
        raise click.UsageError(
            "--register takes no --secret or --secret-file: the signing secret is the one "
            "the provider returns (Stripe) or one hooklatch makes (GitHub)"
        )
    if not register and (event_types or api_url or scope or credential_file):
        raise click.UsageError(
            "--event-type, --api-url, --scope and --credential-file go with --register"
        )
    secrets = read_secrets(values, files)
    given = _key_values(options)
    for key in sorted(plugin.secret_options - given.keys()):
        given[key] = prompt_secret(f"{provider} {key} (input hidden)")
    if register:
        add_registered(
            runtime,
            plugin,
            name=name,
            options=given,
            event_types=event_types,
            place=Place(api_url=api_url, scope=scope),
            file=credential_file,
            as_json=as_json,
        )
        return
    with runtime.session_factory.begin() as session:
        endpoint, plain = create_endpoint(
            session,
            provider=plugin,
            name=name,
            secrets=secrets,
            box=runtime.box,
            options=given,
        )
        changes.created(session, endpoint, actor=cli_actor(), now=runtime.clock())
        generated = not secrets
        data = _endpoint_json(runtime, endpoint, plain if generated and plain else None)
    if as_json:
        echo_json(data)
        return
    click.echo(f"endpoint {data['id']} ({provider}, {name})")
    click.echo(f"URL to register with {provider}: {data['url']}")
    if generated and plain:
        click.echo(f"generated secret (shown once; give it to {provider}): {plain[0]}")
    elif not plain:
        click.echo(
            f"no secret yet: deliveries are refused until you add the one {provider} shows "
            f"for this URL:\n    hooklatch endpoints secrets add {data['id']}"
        )


def _key_values(pairs: tuple[str, ...]) -> dict[str, str]:
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--option")
        result[key] = value
    return result


@endpoints.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def endpoints_list(ctx: click.Context, as_json: bool) -> None:
    """Every endpoint: id, provider, name, state and URL."""
    from hooklatch.endpoints.serialize import page

    runtime = runtime_of(ctx)
    with runtime.session_factory() as session:
        rows = [_endpoint_json(runtime, e) for e in page(session)[0]]
    emit(rows, as_json=as_json, line=_endpoint_line)


def _endpoint_line(row: dict[str, Any]) -> str:
    state = "enabled" if row["enabled"] else "disabled"
    return f"{row['id']}  {row['provider']:<10} {row['name']:<24} {state:<8} {row['url']}"


@endpoints.command("show")
@click.argument("endpoint")
@click.option("--reveal", is_flag=True, help="Also print the secrets in plain text.")
@click.option(
    "--no-check",
    is_flag=True,
    help="Do not ask the provider what it holds now: show what was last read.",
)
@click.pass_context
@friendly
def endpoints_show(ctx: click.Context, endpoint: str, reveal: bool, no_check: bool) -> None:
    """The endpoint, its secrets' fingerprints, its refused deliveries by reason, how many
    of its events repeat an earlier event's body, or its id with another body, and its
    provider's side (``provider_side``): its credential, its webhook at the provider, read
    back now (unless --no-check), and its reconcile runs. Drift is also said on stderr."""
    from hooklatch.services.endpoints import endpoint_details

    runtime = runtime_of(ctx)
    side, warnings = checked_provider_side(runtime, endpoint, check=not no_check)
    echo_json({**endpoint_details(runtime, endpoint, reveal=reveal), "provider_side": side})
    for line in warnings:
        click.echo(line, err=True)


def _switch(enabled: bool, description: str) -> click.Command:
    """`endpoints enable` or `endpoints disable`."""

    @click.command("enable" if enabled else "disable", help=description)
    @click.argument("endpoint")
    @click.pass_context
    @friendly
    def command(ctx: click.Context, endpoint: str) -> None:
        from hooklatch.endpoints.service import get_endpoint

        runtime = runtime_of(ctx)
        with runtime.session_factory.begin() as session:
            row = get_endpoint(session, endpoint)
            changes.set_enabled(session, row, enabled, actor=cli_actor(), now=runtime.clock())
        click.echo(f"endpoint {row.id} {'enabled' if enabled else 'disabled'}")

    return command


endpoints.add_command(_switch(False, "Answer 404 to its deliveries from now on."))
endpoints.add_command(_switch(True, "Take its deliveries again."))


@endpoints.group("secrets")
def endpoint_secrets() -> None:
    """Several secrets may be active at once: add the new one, then remove the old."""


@endpoint_secrets.command("add")
@click.argument("endpoint")
@click.option("--secret", "value", help=VALUE_HELP)
@click.option("--secret-file", "file", type=click.File(), help=FILE_HELP)
@click.pass_context
@friendly
def secrets_add(ctx: click.Context, endpoint: str, value: str | None, file: TextIO | None) -> None:
    """Add a secret to ENDPOINT; both verify until the old one is removed. Given neither
    --secret nor --secret-file, one is generated where the receiver chooses it (GitHub),
    and asked for at a hidden prompt where the provider does."""
    from hooklatch.endpoints.service import get_endpoint

    if value is not None and file is not None:
        raise click.UsageError("give --secret or --secret-file, not both")
    given = read_secrets([value] if value is not None else [], [file] if file else [])
    runtime = runtime_of(ctx)
    with runtime.session_factory() as session:
        provider = runtime.provider(get_endpoint(session, endpoint).provider)
    if given:  # an empty one is refused when it is added, never replaced by a generated one
        [secret], generated = given, False
    else:
        typed = None
        if not provider.generates_secret:
            # Asked before the transaction begins, so that none waits on a person.
            typed = prompt_secret(f"secret {provider.name} shows for {endpoint} (input hidden)")
        secret, generated = changes.secret_to_add(provider, typed)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        added = changes.secret_added(
            session, row, secret, box=runtime.box, actor=cli_actor(), now=runtime.clock()
        )
    if generated:
        click.echo(f"generated secret (shown once): {secret}")
    click.echo(f"secret {added.id} ({added.fingerprint}) added to {row.id}")


@endpoint_secrets.command("remove")
@click.argument("endpoint")
@click.argument("secret_ref", metavar="SECRET_ID_OR_FINGERPRINT")
@click.pass_context
@friendly
def secrets_remove(ctx: click.Context, endpoint: str, secret_ref: str) -> None:
    """Remove a secret by id or fingerprint (not the last one)."""
    from hooklatch.endpoints.service import get_endpoint

    runtime = runtime_of(ctx)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        removed = changes.secret_removed(
            session, row, secret_ref, actor=cli_actor(), now=runtime.clock()
        )
        click.echo(f"secret {removed.id} ({removed.fingerprint}) removed from {row.id}")


for command in (endpoints_credential, endpoints_register, endpoints_unregister, endpoints_remove):
    endpoints.add_command(command)
