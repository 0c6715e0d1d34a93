"""A reconciler like the runtime's, with other settings (a budget, a lease), clock or sleep;
and FakeStripe beside the app served over HTTP."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime

from hooklatch.reconcile.runs import Busy, Reconciler, RunRequest
from hooklatch.runtime import Runtime, reconciler
from tests.support.fake_stripe import FakeStripe
from tests.support.live_app import served


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


@contextmanager
def stripe_and_app(app, runtime, key):
    """FakeStripe answering ``key``, and the app served over HTTP at the public URL the
    endpoint registers (where FakeStripe delivers)."""
    with served(app) as url, FakeStripe() as fake:
        runtime.settings = replace(runtime.settings, public_url=url)
        fake.add_key(key)
        yield fake
