"""Reconcile on a schedule in the relays (HOOKLATCH_RECONCILE_INTERVAL_SECONDS): an
endpoint with a credential is run when its scheduled run is due, then once an interval,
each run from the cursor less the overlap; at each scheduled step its webhook is read
back at the provider first, so drift there shows in `hooklatch status` and the console
with nothing else asking. With the interval 0 only a run asked for runs, and nothing is
read back. Against FakeStripe and FakeGitHub on the runtime's clock, moved by the test."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

import pytest
from click.testing import Result
from sqlalchemy import select

from hooklatch.display import shown_time
from hooklatch.operations.heartbeats import Beat
from hooklatch.reconcile.models import ProviderHook, ReconcileRun, ReconcileState
from hooklatch.reconcile.runs import RunRequest
from hooklatch.services.provider_side import request_reconcile
from hooklatch.workers.relay.reconcile import ReconcileRunner
from tests.support.console import page_of, section, signed_in
from tests.support.provider_apis import Cli, endpoint_of
from tests.support.reconcile import registered_at
from tests.support.relay import clocked

INTERVAL = 3600.0
ELSEWHERE = "https://elsewhere.example.com/hook"


@pytest.fixture
def clock(runtime):
    """The runtime's clock, moved by the test: a scheduled run an hour after the last, and
    processes beating once a minute."""
    return clocked(runtime, reconcile_interval_seconds=INTERVAL, heartbeat_seconds=60.0)


@pytest.fixture(params=["stripe", "github"])
def at_provider(request, runtime, client, clock):
    """An endpoint registered with FakeStripe, then with FakeGitHub."""
    with registered_at(runtime, request.param, clock=clock, client=client) as registered:
        yield registered


def runs(runtime, endpoint: str) -> list[ReconcileRun]:
    """The endpoint's reconcile runs, oldest first."""
    with runtime.session_factory() as session:
        return list(
            session.scalars(
                select(ReconcileRun)
                .where(ReconcileRun.endpoint_id == endpoint)
                .order_by(ReconcileRun.id)
            )
        )


def state_of(runtime, endpoint: str) -> ReconcileState:
    with runtime.session_factory() as session:
        state = session.get(ReconcileState, endpoint)
        assert state is not None
        return state


def hook_of(runtime, endpoint: str) -> ProviderHook:
    with runtime.session_factory() as session:
        hook = session.get(ProviderHook, endpoint)
        assert hook is not None
        return hook


# The schedule.


def test_a_due_run_runs_then_waits_its_interval_and_runs_again_from_the_cursor_less_the_overlap(
    runtime, clock, at_provider
):
    """An endpoint's first scheduled run is due at once; the next is due an interval later,
    and until then the relay asks the provider nothing. That run starts from the cursor
    less the overlap: it finds the event lost since, and not again the one the first run
    recovered."""
    overlap = timedelta(seconds=runtime.settings.reconcile_overlap_seconds)
    relay = ReconcileRunner(runtime)
    started = clock.now
    first_lost = at_provider.lose_event()

    first_step = relay.once()
    due = state_of(runtime, at_provider.endpoint).next_run_at
    asked = at_provider.requests()
    clock.advance(INTERVAL - 1)
    early_step = relay.once()
    waited = at_provider.requests()
    second_lost = at_provider.lose_event()
    clock.advance(1)
    second_step = relay.once()
    first, second = runs(runtime, at_provider.endpoint)

    assert (first_step, early_step, second_step) == (1, 0, 1)
    assert (first.trigger, first.requested_by, first.status) == ("schedule", "relay", "finished")
    assert first.sample == [first_lost] and first.cursor_after == started
    assert due == started + timedelta(seconds=INTERVAL)
    assert waited == asked  # neither a listing nor a read-back before the interval ran out
    assert (second.trigger, second.status, second.started_at) == ("schedule", "finished", due)
    assert second.cursor_before == first.cursor_after
    assert second.since == first.cursor_after - overlap
    assert second.sample == [second_lost] and second.missing == 1
    assert state_of(runtime, at_provider.endpoint).next_run_at == due + timedelta(seconds=INTERVAL)
    assert at_provider.read_backs() == 2  # one at each scheduled step
    assert hook_of(runtime, at_provider.endpoint).checked_at == due


def test_with_the_interval_zero_only_a_run_asked_for_runs_and_nothing_is_read_back(
    runtime, clock, at_provider
):
    """HOOKLATCH_RECONCILE_INTERVAL_SECONDS=0: however long the relay waits, it schedules
    nothing and asks the provider nothing, not even for its webhook (a webhook disabled
    there is not seen); a run asked for runs, and leaves no next run scheduled."""
    runtime.settings = replace(runtime.settings, reconcile_interval_seconds=0.0)
    relay = ReconcileRunner(runtime)
    lost = at_provider.lose_event()
    at_provider.disable()
    asked = at_provider.requests()
    registered = hook_of(runtime, at_provider.endpoint).checked_at

    idle = [relay.once()]
    clock.advance(2 * 86400)
    idle.append(relay.once())
    untouched = at_provider.requests()
    request = RunRequest(trigger="api", requested_by="ann")
    request_reconcile(runtime, at_provider.endpoint, request)
    taken = relay.once()
    after = relay.once()
    [run] = runs(runtime, at_provider.endpoint)
    hook = hook_of(runtime, at_provider.endpoint)

    assert idle == [0, 0] and untouched == asked
    assert (taken, after) == (1, 0)
    assert (run.trigger, run.requested_by, run.sample) == ("api", "ann", [lost])
    assert state_of(runtime, at_provider.endpoint).next_run_at is None
    assert (hook.drift, hook.checked_at) == (None, registered)  # last read at registration
    assert at_provider.read_backs() == 0


# Drift seen by the scheduled step alone.


@dataclass
class Shown:
    """What the faces showed after the relay's scheduled step."""

    status: Result  # `hooklatch status`
    webhook: dict  # `endpoints show --no-check`'s provider_side.webhook
    url: str  # the endpoint's URL
    page: str  # the console endpoint page's "At the provider" section

    def problems(self) -> list[str]:
        return [line for line in self.status.stdout.splitlines() if line.startswith("PROBLEM")]

    def read(self) -> str:
        """When the webhook was read back, as the CLI prints a time."""
        return shown_time(self.webhook["seen"]["checked_at"])


def after_a_scheduled_step(app, settings, runtime, at_provider) -> Shown:
    """`hooklatch status` (all well before the step: a relay and a worker alive, the
    webhook as read at registration), the relay's scheduled step, then what status,
    `endpoints show --no-check` and the console's endpoint page show. Only the step reads
    the webhook back at the provider; none of the faces asks the provider anything."""
    cli = Cli(settings, runtime.settings.public_url)
    for kind in ("relay", "worker"):
        Beat(runtime, kind).once()  # as each process beats
    assert "no drift seen" in cli("status").stdout  # exits 0
    read_backs = at_provider.read_backs()

    assert ReconcileRunner(runtime).once() == 1
    assert at_provider.read_backs() == read_backs + 1
    asked = at_provider.requests()
    status = cli("status", ok=False)
    shown = endpoint_of(cli, at_provider.endpoint)
    client, _ = signed_in(app)
    page = section(page_of(client, at_provider.endpoint))

    assert at_provider.requests() == asked
    return Shown(status, shown["provider_side"]["webhook"], shown["url"], page)


def test_a_webhook_disabled_at_the_provider_is_drift_after_the_scheduled_step_alone(
    app, settings, runtime, at_provider
):
    at_provider.disable()

    shown = after_a_scheduled_step(app, settings, runtime, at_provider)

    provider, types = at_provider.provider, ", ".join(at_provider.event_types)
    assert shown.status.exit_code == 2
    assert (
        f" -> {shown.url}, event types {types}, DISABLED (read {shown.read()})\n"
        "    DRIFT: disabled by the provider\n"
    ) in shown.status.stdout
    assert shown.problems() == [
        f"PROBLEM: {at_provider.endpoint} ({at_provider.name}): its webhook at {provider}: "
        "disabled by the provider"
    ]
    assert shown.webhook["drift"] == ["disabled"]
    assert shown.webhook["seen"] == {  # `endpoints show` says the same
        "url": shown.url,
        "event_types": list(at_provider.event_types),
        "enabled": False,
        "checked_at": shown.webhook["seen"]["checked_at"],
        "error": None,
    }
    assert 'id="drift"' in shown.page and f"{provider} has disabled it" in shown.page
    assert '<span class="badge bad">no</span>' in shown.page


def test_a_webhook_pointed_elsewhere_at_the_provider_is_drift_after_the_scheduled_step_alone(
    app, settings, runtime, at_provider
):
    at_provider.repoint(ELSEWHERE)

    shown = after_a_scheduled_step(app, settings, runtime, at_provider)

    provider, types = at_provider.provider, ", ".join(at_provider.event_types)
    assert shown.status.exit_code == 2
    assert (
        f" -> {ELSEWHERE}, event types {types}, enabled (read {shown.read()})\n"
        f"    DRIFT: url changed to {ELSEWHERE}\n"
    ) in shown.status.stdout
    assert shown.problems() == [
        f"PROBLEM: {at_provider.endpoint} ({at_provider.name}): its webhook at {provider}: "
        f"url changed to {ELSEWHERE}"
    ]
    assert shown.webhook["drift"] == ["url_changed"] and shown.webhook["seen"]["url"] == ELSEWHERE
    assert 'id="drift"' in shown.page and "it delivers to another URL than this" in shown.page
    assert f"<code>{ELSEWHERE}</code>" in shown.page


def test_a_webhook_deleted_at_the_provider_is_drift_after_the_scheduled_step_alone(
    app, settings, runtime, at_provider
):
    at_provider.delete()

    shown = after_a_scheduled_step(app, settings, runtime, at_provider)

    provider = at_provider.provider
    assert shown.status.exit_code == 2
    assert (
        f": {at_provider.hook_id}"
        + (" in repos/acme/shop" if provider == "github" else "")
        + f" -> gone at {provider} (read {shown.read()})\n"
        "    DRIFT: deleted at the provider\n"
    ) in shown.status.stdout
    assert shown.problems() == [
        f"PROBLEM: {at_provider.endpoint} ({at_provider.name}): its webhook at {provider}: "
        "deleted at the provider"
    ]
    assert shown.webhook["drift"] == ["deleted"] and shown.webhook["seen"]["url"] is None
    assert 'id="drift"' in shown.page and f"it is gone at {provider}" in shown.page
