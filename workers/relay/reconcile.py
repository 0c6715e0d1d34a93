"""Reconcile in the relays: a thread that, every few seconds, runs what was asked for
through the admin API or the console, and each endpoint's scheduled run when it is due
(HOOKLATCH_RECONCILE_INTERVAL_SECONDS), reading back its webhook at the provider too.
Every relay runs it; an endpoint's lease lets one run at a time (hooklatch.reconcile.runs)."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta

from hooklatch.endpoints.service import endpoint_url, get_endpoint
from hooklatch.errors import HooklatchError
from hooklatch.reconcile import hooks
from hooklatch.reconcile.credentials import reach
from hooklatch.reconcile.models import ProviderHook, ReconcileState
from hooklatch.reconcile.runs import SCHEDULE, Busy, RunRequest, due_endpoints
from hooklatch.runtime import Runtime, reconciler
from hooklatch.workers.relay import background

log = logging.getLogger(__name__)

STEP_SECONDS = 2.0


class ReconcileRunner:
    def __init__(self, runtime: Runtime, *, step_seconds: float = STEP_SECONDS) -> None:
        self.runtime = runtime
        self.reconciler = reconciler(runtime)
        self.step_seconds = step_seconds

    def once(self) -> int:
        """Run every due endpoint's reconcile, one after the other; returns how many ran."""
        runtime = self.runtime
        scheduled = runtime.settings.reconcile_interval_seconds > 0
        with runtime.session_factory() as session:
            due = due_endpoints(session, now=runtime.clock(), scheduled=scheduled)
        ran = 0
        for endpoint_id, request in due:
            try:
                if request.trigger == SCHEDULE:
                    self.check_hook(endpoint_id)
                self.reconciler.run(endpoint_id, request)
            except Busy:
                continue  # another relay or a person's run has it
            except (HooklatchError, LookupError) as exc:  # LookupError: provider not installed
                # Not tried again at every step: at its next scheduled time, or when asked.
                log.warning("reconcile of %s cannot start: %s", endpoint_id, exc)
                self.put_off(endpoint_id, request)
                continue
            ran += 1
        if ran:
            runtime.wake_dispatcher()  # the embedded dispatcher runs what was fetched now
        return ran

    def put_off(self, endpoint_id: str, request: RunRequest) -> None:
        """A run that cannot start waits for its next scheduled time; one asked for is
        dropped (the warning says why), or it would be tried at every step."""
        runtime = self.runtime
        interval = max(runtime.settings.reconcile_interval_seconds, STEP_SECONDS)
        with runtime.session_factory.begin() as session:
            state = session.get(ReconcileState, endpoint_id)
            if state is None:
                return
            if request.queued:
                state.requested = None
            else:
                state.next_run_at = runtime.clock() + timedelta(seconds=interval)

    def check_hook(self, endpoint_id: str) -> None:
        """Read back the endpoint's webhook at the provider, noting any drift."""
        runtime = self.runtime
        with runtime.session_factory.begin() as session:
            hook = session.get(ProviderHook, endpoint_id)
            if hook is None or hook.hook_id is None:
                return
            endpoint = get_endpoint(session, endpoint_id)
            try:
                reached = reach(
                    session, endpoint, runtime.provider(endpoint.provider), box=runtime.box
                )
            except (HooklatchError, LookupError) as exc:
                log.warning("the webhook of %s cannot be read back: %s", endpoint_id, exc)
                return
            url = endpoint_url(runtime.settings.public_url, endpoint)
            hooks.check(session, endpoint, reached, url=url, now=runtime.clock())

    def run(self, stop: threading.Event) -> None:
        background.repeat(stop, self.once, every=self.step_seconds, what="reconcile", logger=log)

    def start(self, stop: threading.Event) -> threading.Thread:
        return background.start("hooklatch-reconcile", self.run, stop)
