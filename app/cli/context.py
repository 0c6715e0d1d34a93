"""What every command needs: settings and the runtime, read when first asked for, and
hooklatch's own errors shown as one line."""

from __future__ import annotations

import getpass
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import click

from hooklatch.errors import HooklatchError
from hooklatch.handler_modules import HandlerImportError
from hooklatch.settings import Settings, SettingsError

if TYPE_CHECKING:
    from hooklatch.runtime import Runtime

P = ParamSpec("P")
R = TypeVar("R")


def settings_of(ctx: click.Context) -> Settings:
    """Read when a command needs it, so `keys generate` works before anything is configured."""
    if "settings" not in ctx.obj:
        try:
            ctx.obj["settings"] = Settings.from_env()
        except SettingsError as exc:
            raise click.ClickException(str(exc)) from exc
    settings: Settings = ctx.obj["settings"]
    return settings


def runtime_of(ctx: click.Context) -> Runtime:
    """Built once per command: handlers imported, plugins loaded and checked."""
    from hooklatch.assembly import build_runtime

    if "runtime" not in ctx.obj:
        with starting():
            ctx.obj["runtime"] = build_runtime(settings_of(ctx))
    runtime: Runtime = ctx.obj["runtime"]
    return runtime


@contextmanager
def starting() -> Iterator[None]:
    """What stops a process at its start (a setting, a plugin, a handler module that is
    not found) as one line; a handler module's own error with its traceback above it."""
    try:
        yield
    except HandlerImportError as exc:
        if exc.details:
            click.echo(exc.details, err=True)
        raise click.ClickException(str(exc)) from exc
    except (SettingsError, LookupError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc


def friendly(command: Callable[P, R]) -> Callable[P, R]:
    """Render hooklatch's own errors as one clear line and exit 1."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (HooklatchError, LookupError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc

    return wrapper


def cli_actor(given: str | None = None) -> str:
    """Who acts, for the audit log: ``given`` (--by), else the user running the command;
    either way marked as the CLI's."""
    return f"{given or getpass.getuser()} (cli)"
