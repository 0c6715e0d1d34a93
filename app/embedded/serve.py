"""`hooklatch serve`: gunicorn in-process; on the embedded default, a ready demo endpoint."""

from __future__ import annotations

import os
import secrets
from dataclasses import replace
from typing import Any

import click
from flask import Flask
from gunicorn.app.base import BaseApplication
from sqlalchemy import select

from hooklatch.settings import Settings

DEMO_ENDPOINT = "demo"
# Threads, and a client too slow to send its request let go (see its docstring).
WORKER_CLASS = "hooklatch.embedded.worker.PacedThreadWorker"


class _Gunicorn(BaseApplication):
    def __init__(self, settings: Settings, options: dict[str, Any]) -> None:
        self.settings = settings
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        """The web process's settings (hooklatch.gunicorn_config, as the Procfile's web
        reads them: its log lines, metrics directory, hooks), then this command's."""
        from hooklatch import gunicorn_config

        shipped = {
            name: value
            for name, value in vars(gunicorn_config).items()
            if name in self.cfg.settings
        }
        for key, value in {**shipped, **self.options}.items():
            self.cfg.set(key, value)

    def load(self) -> Flask:
        from hooklatch import create_app

        return create_app(self.settings)


def prepare_server(
    settings: Settings, *, host: str, port: int, send_command: str
) -> BaseApplication:
    """gunicorn for `hooklatch serve`, to be run; on the embedded default, with its
    database migrated and its demo endpoint made."""
    send_command += f" send-test {DEMO_ENDPOINT}"
    if not os.environ.get("HOOKLATCH_PUBLIC_URL"):
        settings = replace(settings, public_url=f"http://{host}:{port}")
        if settings.public_url != Settings.public_url:
            send_command += f" --url {settings.public_url}"
    options: dict[str, Any] = {"bind": f"{host}:{port}"}
    if settings.embedded:
        # One process: the dispatcher thread lives beside the request threads.
        options.update(workers=1, worker_class=WORKER_CLASS, threads=4)
        settings = settings.with_embedded_key()
        _prepare_embedded(settings, send_command)
    return _Gunicorn(settings, options)


def _prepare_embedded(settings: Settings, send_command: str) -> None:
    from alembic import command

    from hooklatch.assembly import build_runtime
    from hooklatch.endpoints.models import Endpoint
    from hooklatch.endpoints.service import create_endpoint, endpoint_url
    from hooklatch.migrations import alembic_config

    settings.instance_path.mkdir(parents=True, exist_ok=True)
    command.upgrade(alembic_config(settings.sqlalchemy_url), "head")
    if not settings.handlers:
        import hooklatch.embedded.demo  # noqa: F401  (registers the demo handler)
    runtime = build_runtime(settings)
    with runtime.session_factory.begin() as session:
        endpoint = session.scalar(select(Endpoint).where(Endpoint.name == DEMO_ENDPOINT))
        if endpoint is None:
            endpoint, _ = create_endpoint(
                session,
                provider=runtime.provider("stripe"),
                name=DEMO_ENDPOINT,
                secrets=["whsec_" + secrets.token_urlsafe(24)],
                box=runtime.box,
            )
        url = endpoint_url(settings.public_url, endpoint)
    runtime.dispose()
    where = (
        f"SQLite at {settings.sqlalchemy_url.removeprefix('sqlite:///')}"
        if settings.database_url is None
        else "the database in DATABASE_URL"
    )
    click.echo(
        f"\nhooklatch (embedded: {where}, handlers run in this process)\n"
        f"Demo endpoint '{DEMO_ENDPOINT}' (stripe): {url}\n"
        "Send it a correctly signed test event from another terminal, in this folder:\n\n"
        f"    {send_command}\n",
        err=True,
    )
