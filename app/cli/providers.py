"""`hooklatch providers`: the installed provider plugins."""

from __future__ import annotations

from typing import Any

import click

from hooklatch.cli.context import runtime_of
from hooklatch.cli.output import emit


@click.command("providers")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def providers_list(ctx: click.Context, as_json: bool) -> None:
    """The installed provider plugins, checked as at start."""
    runtime = runtime_of(ctx)
    rows = [
        {
            "name": name,
            "class": f"{type(p).__module__}.{type(p).__qualname__}",
            "retry_window_days": p.retry_window.total_seconds() / 86400,
            "options": dict(p.options),
        }
        for name, p in sorted(runtime.providers.items())
    ]
    emit(rows, as_json=as_json, line=_provider_line)


def _provider_line(row: dict[str, Any]) -> str:
    options = ", ".join(row["options"]) or "-"
    return (
        f"{row['name']:<18} retry window {row['retry_window_days']:g} d   options: {options}"
        f"   ({row['class']})"
    )
