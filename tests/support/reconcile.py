"""A reconciler like the runtime's, with other settings (a budget, a lease), clock or sleep."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from hooklatch.reconcile.runs import Busy, Reconciler, RunRequest
from hooklatch.runtime import Runtime, reconciler


def reconciler_with(
    runtime: Runtime,
    *,
    clock: Callable[[], datetime] | None = None,
    sleep: Callable[[float], None] | None = None,
    **settings: object,
) -> Reconciler:
    base = reconciler(runtime)
    return Reconciler(
        session_factory=base.session_factory,
        box=base.box,
        provider=base.provider,
        settings=replace(base.settings, **settings),  # type: ignore[arg-type]
        public_url=base.public_url,
        clock=clock or base.clock,
        sleep=sleep or base.sleep,
    )


def second_run(reconciler: Reconciler, endpoint: str) -> str:
    """A run started beside another: "busy" where the other holds the endpoint, else
    "ran"."""
    try:
        reconciler.run(endpoint, RunRequest(trigger="cli", requested_by="second"))
    except Busy:
        return "busy"
    return "ran"
