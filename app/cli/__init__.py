"""The `hooklatch` command."""

from __future__ import annotations

import getpass
import json
import shlex
import sys
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
from sqlalchemy import select

from app.errors import HooklatchError
from app.settings import Settings, SettingsError


def _settings(ctx: click.Context) -> Settings:
    """Read when a command needs it, so `keys generate` works before anything is configured."""
    if "settings" not in ctx.obj:
        try:
            ctx.obj["settings"] = Settings.from_env()
        except SettingsError as exc:
            raise click.ClickException(str(exc)) from exc
    settings: Settings = ctx.obj["settings"]
    return settings


def _runtime(ctx: click.Context) -> Any:
    from app.runtime import build_runtime

    if "runtime" not in ctx.obj:
        try:
            ctx.obj["runtime"] = build_runtime(_settings(ctx))
        except (SettingsError, LookupError, RuntimeError) as exc:
            raise click.ClickException(str(exc)) from exc
    return ctx.obj["runtime"]


def friendly(command: Callable[..., Any]) -> Callable[..., Any]:
    """Render hooklatch's own errors as one clear line and exit 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (HooklatchError, LookupError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


def _echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


@click.group()
@click.pass_context
def main(ctx: click.Context) -> None:
    """hooklatch: receive webhooks, store each event once, run handlers once."""
    from app import logs

    logs.configure()
    ctx.ensure_object(dict)


@main.group()
def keys() -> None:
    """Keys for HOOKLATCH_SECRET_KEYS."""


@keys.command("generate")
def keys_generate() -> None:
    """Print a new Fernet key (put it first in HOOKLATCH_SECRET_KEYS to rotate)."""
    from app.crypto import generate_key

    click.echo(generate_key())


@keys.command("rotate")
@click.pass_context
def keys_rotate(ctx: click.Context) -> None:
    """Re-encrypt every stored secret with the first key; then older keys can be dropped."""
    from app.endpoints.models import EndpointSecret

    runtime = _runtime(ctx)
    with runtime.session_factory.begin() as session:
        rows = session.scalars(select(EndpointSecret)).all()
        for row in rows:
            row.ciphertext = runtime.box.rotate(row.ciphertext)
    click.echo(f"re-encrypted {len(rows)} secrets with the first key")


@main.group()
def db() -> None:
    """Database schema."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True)
@click.pass_context
def db_upgrade(ctx: click.Context, revision: str) -> None:
    """Apply migrations (the Procfile's release step)."""
    from alembic import command

    from migrations import alembic_config

    settings = _settings(ctx).with_embedded_key()
    if settings.database_url is None:
        settings.instance_path.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(settings.sqlalchemy_url), revision)
    click.echo(f"database at revision {revision}")


# -- endpoints -----------------------------------------------------------------


@main.group()
def endpoints() -> None:
    """The URLs you register with providers."""


def _endpoint_json(runtime: Any, endpoint: Any, secrets: list[str] | None = None) -> dict[str, Any]:
    from app.endpoints.service import endpoint_url, shown_options

    data: dict[str, Any] = {
        "id": endpoint.id,
        "name": endpoint.name,
        "provider": endpoint.provider,
        "enabled": endpoint.enabled,
        "url": endpoint_url(runtime.settings.public_url, endpoint),
        "secrets": [
            {"id": s.id, "fingerprint": s.fingerprint, "created_at": s.created_at.isoformat()}
            for s in endpoint.secrets
        ],
        "options": shown_options(endpoint.options),
    }
    if secrets is not None:
        data["secret_values"] = secrets
    return data


@endpoints.command("add")
@click.argument("provider")
@click.option("--name", required=True, help="A unique name for the endpoint.")
@click.option("--secret", "secrets", multiple=True, help="Signing secret; repeat for several.")
@click.option(
    "--option",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="A provider option (see docs/plugins.md); repeat for several.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (id, url, secrets).")
@click.pass_context
@friendly
def endpoints_add(
    ctx: click.Context,
    provider: str,
    name: str,
    secrets: tuple[str, ...],
    options: tuple[str, ...],
    as_json: bool,
) -> None:
    """Create an endpoint and print the URL to give PROVIDER."""
    from app.endpoints.service import create_endpoint

    runtime = _runtime(ctx)
    plugin = runtime.provider(provider)
    with runtime.session_factory.begin() as session:
        endpoint, plain = create_endpoint(
            session,
            provider=plugin,
            name=name,
            secrets=list(secrets),
            box=runtime.box,
            options=_key_values(options),
        )
        generated = not secrets
        data = _endpoint_json(runtime, endpoint, plain if generated and plain else None)
    if as_json:
        _echo_json(data)
        return
    click.echo(f"endpoint {data['id']} ({provider}, {name})")
    click.echo(f"URL to register with {provider}: {data['url']}")
    if generated and plain:
        click.echo(f"generated secret (shown once; give it to {provider}): {plain[0]}")
    elif not plain:
        click.echo(
            f"no secret yet: deliveries are refused until you add the one {provider} shows "
            f"for this URL:\n    hooklatch endpoints secrets add {data['id']} --secret ..."
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
    from app.endpoints.models import Endpoint

    runtime = _runtime(ctx)
    with runtime.session_factory() as session:
        rows = [
            _endpoint_json(runtime, e)
            for e in session.scalars(select(Endpoint).order_by(Endpoint.created_at))
        ]
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        state = "enabled" if row["enabled"] else "disabled"
        click.echo(f"{row['id']}  {row['provider']:<10} {row['name']:<24} {state:<8} {row['url']}")


@endpoints.command("show")
@click.argument("endpoint")
@click.option("--reveal", is_flag=True, help="Also print the secrets in plain text.")
@click.pass_context
@friendly
def endpoints_show(ctx: click.Context, endpoint: str, reveal: bool) -> None:
    """The endpoint, its secrets' fingerprints, and its refused deliveries by reason."""
    from app.endpoints.service import get_endpoint, refusal_counts

    runtime = _runtime(ctx)
    with runtime.session_factory() as session:
        row = get_endpoint(session, endpoint)
        secrets = [runtime.box.decrypt(s.ciphertext) for s in row.secrets] if reveal else None
        data = _endpoint_json(runtime, row, secrets)
        data["refused"] = refusal_counts(session, row.id)
        _echo_json(data)


@endpoints.command("disable")
@click.argument("endpoint")
@click.pass_context
@friendly
def endpoints_disable(ctx: click.Context, endpoint: str) -> None:
    """Answer 404 to its deliveries from now on."""
    _set_enabled(ctx, endpoint, False)


@endpoints.command("enable")
@click.argument("endpoint")
@click.pass_context
@friendly
def endpoints_enable(ctx: click.Context, endpoint: str) -> None:
    _set_enabled(ctx, endpoint, True)


def _set_enabled(ctx: click.Context, ref: str, enabled: bool) -> None:
    from app.endpoints.service import get_endpoint

    runtime = _runtime(ctx)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, ref)
        row.enabled = enabled
    click.echo(f"endpoint {row.id} {'enabled' if enabled else 'disabled'}")


@endpoints.group("secrets")
def endpoint_secrets() -> None:
    """Several secrets may be active at once: add the new one, then remove the old."""


@endpoint_secrets.command("add")
@click.argument("endpoint")
@click.option("--secret", help="The new secret; omitted, one is generated where allowed.")
@click.pass_context
@friendly
def secrets_add(ctx: click.Context, endpoint: str, secret: str | None) -> None:
    from app.endpoints.service import add_secret, generate_secret, get_endpoint
    from app.errors import BadRequest

    runtime = _runtime(ctx)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        if secret is None:
            if not runtime.provider(row.provider).generates_secret:
                raise BadRequest(f"{row.provider} chooses the secret: pass --secret")
            secret = generate_secret()
            click.echo(f"generated secret (shown once): {secret}")
        added = add_secret(session, row, secret, box=runtime.box)
        click.echo(f"secret {added.id} ({added.fingerprint}) added to {row.id}")


@endpoint_secrets.command("remove")
@click.argument("endpoint")
@click.argument("secret_ref", metavar="SECRET_ID_OR_FINGERPRINT")
@click.pass_context
@friendly
def secrets_remove(ctx: click.Context, endpoint: str, secret_ref: str) -> None:
    from app.endpoints.service import get_endpoint, remove_secret

    runtime = _runtime(ctx)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        removed = remove_secret(session, row, secret_ref)
        click.echo(f"secret {removed.id} ({removed.fingerprint}) removed from {row.id}")


# -- events --------------------------------------------------------------------


@main.group()
def events() -> None:
    """Stored events, their attempts and replays."""


@events.command("list")
@click.option("--status", type=click.Choice(["pending", "processed", "ignored", "dead"]))
@click.option("--limit", default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def events_list(ctx: click.Context, status: str | None, limit: int, as_json: bool) -> None:
    from app.events.service import describe_event, list_events

    runtime = _runtime(ctx)
    with runtime.session_factory() as session:
        rows = [describe_event(e) for e in list_events(session, status=status, limit=limit)]
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        click.echo(
            f"{row['id']:>8}  {row['status']:<9} {row['provider']:<8} {row['type']:<28} "
            f"{row['external_id']}  attempts={row['attempts']}  {row['received_at']}"
        )


@events.command("show")
@click.argument("event_id", type=int)
@click.pass_context
@friendly
def events_show(ctx: click.Context, event_id: int) -> None:
    from app.errors import NotFound
    from app.events.models import Event
    from app.events.service import event_history

    runtime = _runtime(ctx)
    with runtime.session_factory() as session:
        row = session.get(Event, event_id)
        if row is None:
            raise NotFound(f"no event {event_id}")
        _echo_json(event_history(session, row))


@events.command("replay")
@click.argument("event_id", type=int)
@click.option("--reason", required=True, help="Why: recorded with the replay.")
@click.option("--by", "requested_by", default=None, help="Who asks (default: your user name).")
@click.pass_context
@friendly
def events_replay(ctx: click.Context, event_id: int, reason: str, requested_by: str | None) -> None:
    """Run the event's handlers again, whatever its state."""
    from app.events.service import describe_replay, request_replay

    runtime = _runtime(ctx)
    with runtime.session_factory.begin() as session:
        replay = request_replay(
            session,
            event_id,
            requested_by=requested_by or f"{getpass.getuser()} (cli)",
            reason=reason,
            now=runtime.clock(),
        )
        _echo_json(describe_replay(replay))


# -- processes -----------------------------------------------------------------


@main.command()
@click.pass_context
def relay(ctx: click.Context) -> None:
    """Move outbox rows into queue jobs; re-dispatch due retries and lost work."""
    from workers.worker import run_relay

    run_relay(_runtime(ctx))


@main.command()
@click.option("--burst", is_flag=True, help="Exit when the queue is empty.")
@click.option("--simple", is_flag=True, help="Run jobs in this process instead of a forked one.")
@click.pass_context
def worker(ctx: click.Context, burst: bool, simple: bool) -> None:
    """Run handlers for queued events (an RQ worker on hooklatch's queue)."""
    from workers.worker import run_worker

    run_worker(_runtime(ctx), burst=burst, fork=not simple)


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int) -> None:
    """Serve the receiver. With no DATABASE_URL and no REDIS_URL: SQLite, handlers in-process,
    and a demo endpoint you can send a signed test event to."""
    from app.serve import serve_embedded

    serve_embedded(_settings(ctx), host=host, port=port, send_command=_self_command())


def _self_command() -> str:
    return (
        shlex.quote(sys.argv[0]) if sys.argv and sys.argv[0].endswith("hooklatch") else "hooklatch"
    )


@main.command("send-test")
@click.argument("endpoint")
@click.option("--url", help="Base URL of the receiver (default: HOOKLATCH_PUBLIC_URL).")
@click.option("--wait/--no-wait", default=True, help="Wait until the event is processed.")
@click.pass_context
@friendly
def send_test(ctx: click.Context, endpoint: str, url: str | None, wait: bool) -> None:
    """Send ENDPOINT a correctly signed sample event, as its provider would."""
    from app.testing import send_signed_sample

    runtime = _runtime(ctx)
    status, body = send_signed_sample(runtime, endpoint, base_url=url)
    click.echo(f"HTTP {status} {json.dumps(body)}")
    if status != 200 or not wait:
        sys.exit(0 if status == 200 else 1)
    event_id = body["events"][0]["id"]
    final = _wait_for_event(runtime, event_id, timeout=15)
    click.echo(f"event {event_id}: {final}")
    sys.exit(0 if final in ("processed", "ignored") else 1)


def _wait_for_event(runtime: Any, event_id: int, *, timeout: float) -> str:
    from app.events.models import Event

    deadline = time.monotonic() + timeout
    status = "pending"
    while time.monotonic() < deadline:
        with runtime.session_factory() as session:
            status = session.scalar(select(Event.status).where(Event.id == event_id)) or "missing"
        if status != "pending":
            return status
        time.sleep(0.2)
    return status


@main.command("providers")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def providers_list(ctx: click.Context, as_json: bool) -> None:
    """The installed provider plugins, checked as at start."""
    runtime = _runtime(ctx)
    rows = [
        {
            "name": name,
            "class": f"{type(p).__module__}.{type(p).__qualname__}",
            "retry_window_days": p.retry_window.total_seconds() / 86400,
            "options": dict(p.options),
        }
        for name, p in sorted(runtime.providers.items())
    ]
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        options = ", ".join(row["options"]) or "-"
        click.echo(
            f"{row['name']:<18} retry window {row['retry_window_days']:g} d   options: {options}"
            f"   ({row['class']})"
        )


if __name__ == "__main__":
    main()
