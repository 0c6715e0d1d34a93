"""Reconcile against GitHub under faults: a redelivery refused for one delivery (404,
422). Every delivery GitHub failed is asked for once, each arrives signed and runs its
handler once, the cursor is never ahead of what was asked for, and each error shows with
its reason. Against FakeGitHub."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from sqlalchemy import select

from hooklatch.events.models import Event
from hooklatch.reconcile.models import ReconcileState
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import reconciler
from tests.integration.test_reconcile_github import registered
from tests.support.pipeline import drain, runs_of

def lost_deliveries(github, hook_id, count, *, branch="l"):
    """Deliveries GitHub failed (hooklatch was away), oldest first; their guids."""
    return [
        github.deliver(hook_id, "push", {"ref": f"refs/heads/{branch}{n}"}, fail=True)
        for n in range(count)
    ]


def first_attempt(github, hook_id, guid):
    [attempt] = [d for d in github.deliveries(hook_id) if d.guid == guid and not d.redelivery]
    return attempt


def run_now(runtime, endpoint):
    return reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))


def state_of(runtime, endpoint):
    with runtime.session_factory() as session:
        state = session.get(ReconcileState, endpoint)
        assert state is not None
        session.expunge(state)
        return state


def asked_for(github, hook_id):
    """How many times GitHub redelivered each delivery."""
    return Counter(d.guid for d in github.redeliveries(hook_id))


def assert_asked_once_each(github, hook_id, guids):
    assert asked_for(github, hook_id) == Counter(guids)


def assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id, *, passed_over=()):
    """Every delivery GitHub failed at or before the cursor was asked for again, or was
    refused for good (``passed_over``)."""
    cursor = state_of(runtime, endpoint).cursor
    if cursor is None:
        return
    failed_before = {
        d.guid
        for d in github.deliveries(hook_id)
        if not d.redelivery and not 200 <= d.status_code < 300 and d.delivered_at <= cursor
    }
    assert failed_before - set(asked_for(github, hook_id)) - set(passed_over) == set()


def assert_each_ran_once(runtime, ran, guids):
    """Each delivery ran its handler once, and came as a delivery signed by the hook."""
    drain(runtime)
    assert len(ran) == len(guids) and set(Counter(ran).values()) == {1}
    with runtime.session_factory() as session:
        came = session.execute(
            select(Event.external_id, Event.origin, Event.verified_by).where(Event.id.in_(ran))
        ).all()
    assert {guid for guid, _, _ in came} == set(guids)
    assert {(origin, how) for _, origin, how in came} == {("webhook", "signature")}


@pytest.mark.parametrize(
    ("status", "reason", "words"),
    [(404, "not_found", "Not Found"), (422, "invalid", "Validation")],
    ids=["404", "422"],
)
def test_a_redelivery_refused_for_one_delivery_is_passed_over_and_the_others_asked_for(
    runtime, router, github, caplog, status, reason, words
):
    """GitHub refuses to redeliver one delivery (404 once it is past the 3 days it keeps):
    the run says which and why, asks for every other, and moves the cursor on, so the
    deliveries after it are not held behind it."""
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = lost_deliveries(github, hook_id, 5)
    gone = lost[1]
    attempt = first_attempt(github, hook_id, gone).id
    github.script(status, path_contains=f"/deliveries/{attempt}/attempts", method="POST")

    run = run_now(runtime, endpoint)

    assert (run["status"], run["stop_reason"]) == ("finished", None)
    assert (run["missing"], run["redeliveries"], run["api_errors"]) == (5, 4, 1)
    assert f"{gone}: {reason} (HTTP {status}, {words}" in run["error"]
    assert "cannot be recovered by redelivery" in run["error"]
    assert state_of(runtime, endpoint).errors_total == {reason: 1}
    [logged] = [r for r in caplog.records if gone in r.getMessage()]
    assert logged.levelno == logging.WARNING and str(attempt) in logged.getMessage()
    assert_asked_once_each(github, hook_id, [g for g in lost if g != gone])
    cursor = state_of(runtime, endpoint).cursor
    assert cursor is not None and cursor > first_attempt(github, hook_id, gone).delivered_at
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id, passed_over=[gone])
    assert_each_ran_once(runtime, ran, [g for g in lost if g != gone])


def test_a_delivery_github_keeps_refusing_holds_back_no_later_run(runtime, router, github):
    """Each run used to stop at the refused delivery, asking for nothing newer until it
    aged out: now each passes over it, and asks for what came since."""
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    [gone, *rest] = lost_deliveries(github, hook_id, 3)
    attempt = first_attempt(github, hook_id, gone).id
    github.script(404, times=10, path_contains=f"/deliveries/{attempt}/attempts")
    first = run_now(runtime, endpoint)
    later = lost_deliveries(github, hook_id, 2, branch="later")

    second = run_now(runtime, endpoint)

    assert (first["status"], first["redeliveries"]) == ("finished", 2)
    # The refused one is still within the overlap: asked once more, and passed over again.
    assert (second["status"], second["missing"], second["redeliveries"]) == ("finished", 3, 2)
    assert gone in second["error"]
    assert state_of(runtime, endpoint).errors_total == {"not_found": 2}
    assert_asked_once_each(github, hook_id, rest + later)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id, passed_over=[gone])
    assert_each_ran_once(runtime, ran, rest + later)
