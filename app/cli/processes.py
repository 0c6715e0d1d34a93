"""The long-running commands (`relay`, `worker`, `serve`), and `send-test`, which talks to a
running receiver."""

from __future__ import annotations

import json
import shlex
import sys
import time

import click
from sqlalchemy import select

from hooklatch.cli.context import friendly, runtime_of, settings_of, starting
from hooklatch.events.models import PENDING, Event
from hooklatch.runtime import Runtime


@click.command()
@click.pass_context
def relay(ctx: click.Context) -> None:
    """Move outbox rows into queue jobs; re-dispatch due retries and lost work."""
    from hooklatch.embedded.sinks import make_sink
    from hooklatch.workers.relay.main import run_relay

    runtime = runtime_of(ctx)
    run_relay(runtime, make_sink(runtime))


@click.command()
@click.option("--burst", is_flag=True, help="Exit when the queue is empty.")
@click.option(
    "--simple", is_flag=True, help="Run jobs in this process instead of a forked work horse."
)
@click.pass_context
def worker(ctx: click.Context, burst: bool, simple: bool) -> None:
    """Run handlers for queued events (an RQ worker on hooklatch's queue)."""
    from hooklatch.workers.worker.main import run_worker

    run_worker(runtime_of(ctx), burst=burst, simple=simple)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True)
@click.pass_context
def serve(ctx: click.Context, host: str, port: int) -> None:
    """Serve the receiver. With no DATABASE_URL and no REDIS_URL: SQLite, handlers in-process,
    and a demo endpoint you can send a signed test event to."""
    from hooklatch.embedded.serve import prepare_server

    settings = settings_of(ctx)
    with starting():  # the embedded default builds a runtime before gunicorn starts
        server = prepare_server(settings, host=host, port=port, send_command=_self_command())
    server.run()


def _self_command() -> str:
    return (
        shlex.quote(sys.argv[0]) if sys.argv and sys.argv[0].endswith("hooklatch") else "hooklatch"
    )


@click.command("send-test")
@click.argument("endpoint")
@click.option("--url", help="Base URL of the receiver (default: HOOKLATCH_PUBLIC_URL).")
@click.option("--wait/--no-wait", default=True, help="Wait until the event is processed.")
@click.pass_context
@friendly
def send_test(ctx: click.Context, endpoint: str, url: str | None, wait: bool) -> None:
    """Send ENDPOINT a correctly signed sample event, as its provider would."""
    from hooklatch.embedded.send_test import send_signed_sample
    from hooklatch.endpoints.service import endpoint_url, get_endpoint

    runtime = runtime_of(ctx)
    with runtime.session_factory() as session:
        row = get_endpoint(session, endpoint)
        secret = runtime.box.decrypt(row.secrets[-1].ciphertext)
        target = endpoint_url(url or runtime.settings.public_url, row)
        provider, options = runtime.provider(row.provider), dict(row.options or {})
    status, body = send_signed_sample(
        provider, target, secret=secret, options=options, now=runtime.clock()
    )
    click.echo(f"HTTP {status} {json.dumps(body)}")
    if status != 200 or not wait:
        sys.exit(0 if status == 200 else 1)
    event_id = body["events"][0]["id"]
    final = _wait_for_event(runtime, event_id, timeout=15)
    click.echo(f"event {event_id}: {final}")
    sys.exit(0 if final in ("processed", "ignored") else 1)


def _wait_for_event(runtime: Runtime, event_id: int, *, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    status = PENDING
    while time.monotonic() < deadline:
        with runtime.session_factory() as session:
            status = session.scalar(select(Event.status).where(Event.id == event_id)) or "missing"
        if status != PENDING:
            return status
        time.sleep(0.2)
    return status
