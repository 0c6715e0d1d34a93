"""Reconcile against GitHub under faults: its API answering 500 in the middle of the
listing, a token revoked mid-run, rate limits (a spent quota's 403 and x-ratelimit-reset, a
429's Retry-After), a redelivery refused for one delivery (422), and a run stopped among
its redeliveries (a 404 among the reasons). Every delivery GitHub failed is asked for once,
each arrives signed and runs its handler once, the cursor is never ahead of what was asked
for, and each error shows with its reason. Against FakeGitHub."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from urllib.parse import urlsplit

import pytest
from sqlalchemy import select

from hooklatch.events.models import Event
from hooklatch.reconcile.models import ReconcileState
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import set_credential
from tests.integration.test_reconcile_github import registered
from tests.support.fake_github import FakeGitHub
from tests.support.pipeline import drain, runs_of
from tests.support.reconcile import reconciler_with
from tests.support.tokens import GITHUB_TOKEN

# Tokens of this file's own FakeGitHub, whose tails are nowhere else.
TOKEN = "ghp_faults0123456789abcdefghijklmnoQZXW"
NEW_TOKEN = "ghp_faults_rotated_0123456789abcdeYVUT"


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


def test_github_failing_mid_listing_cuts_the_run_short_and_the_next_asks_for_the_rest_once(
    runtime, router, github
):
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = lost_deliveries(github, hook_id, 250)
    github.script(500, times=3, after=1, path_contains="/deliveries", method="GET")

    cut = run_now(runtime, endpoint)

    assert (cut["status"], cut["stop_reason"]) == ("cut_short", "server_error")
    assert "HTTP 500" in cut["error"] and cut["api_errors"] == 3
    # The first page (the newest 100), both retries of the second, and what the first
    # page listed is asked for.
    assert (cut["pages"], cut["requests"], cut["redeliveries"]) == (1, 1 + 3 + 100, 100)
    assert_asked_once_each(github, hook_id, lost[150:])
    assert state_of(runtime, endpoint).cursor is None
    assert state_of(runtime, endpoint).errors_total == {"server_error": 3}

    resumed = run_now(runtime, endpoint)

    # It goes on from the page that failed, never the newest again.
    assert (resumed["status"], resumed["pages"], resumed["redeliveries"]) == ("finished", 2, 150)
    listings = [r for r in github.requests if r.method == "GET" and r.path.endswith("/deliveries")]
    assert "cursor" in listings[-2].query
    assert state_of(runtime, endpoint).resume is None
    assert_asked_once_each(github, hook_id, lost)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id)
    assert_each_ran_once(runtime, ran, lost)


def test_a_token_revoked_mid_run_stops_it_unseen_and_a_rotated_one_resumes(
    runtime, router, client, caplog
):
    caplog.set_level(logging.DEBUG)
    ran = runs_of(router, "github")
    arrived: list[str] = []

    def send(url, headers, body):
        """The token is revoked as the 40th redelivery arrives."""
        arrived.append(headers["X-GitHub-Delivery"])
        if len(arrived) == 40:
            fake.revoke(TOKEN)
        return client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code

    with FakeGitHub(send=send) as fake:
        fake.add_token(TOKEN)
        endpoint, hook_id = registered(runtime, fake, token=TOKEN)
        lost = lost_deliveries(fake, hook_id, 150)

        cut = run_now(runtime, endpoint)

        assert (cut["status"], cut["stop_reason"]) == ("cut_short", "unauthorized")
        # No retry of a 401: the 41st redelivery asked for is the last request.
        assert (cut["redeliveries"], cut["requests"], cut["api_errors"]) == (40, 2 + 41, 1)
        assert "HTTP 401" in cut["error"] and "Bad credentials" in cut["error"]
        assert state_of(runtime, endpoint).cursor is None
        refused = run_now(runtime, endpoint)
        assert (refused["stop_reason"], refused["requests"]) == ("unauthorized", 1)
        assert state_of(runtime, endpoint).errors_total == {"unauthorized": 2}
        fake.add_token(NEW_TOKEN)
        set_credential(runtime, endpoint, {"token": NEW_TOKEN}, actor="test")

        resumed = run_now(runtime, endpoint)

        assert (resumed["status"], resumed["redeliveries"]) == ("finished", 110)
        assert_asked_once_each(fake, hook_id, lost)
        assert_cursor_behind_what_was_asked(runtime, endpoint, fake, hook_id)
        assert_each_ran_once(runtime, ran, lost)
    shown = json.dumps([cut, refused, resumed])
    for token in (TOKEN, NEW_TOKEN):
        assert token not in shown and token[-4:] not in shown
        assert token not in caplog.text and token[-4:] not in caplog.text


@pytest.mark.parametrize(
    ("fault", "waits"),
    [
        # The quota spent: GitHub's 403 with x-ratelimit-remaining 0 on the second page,
        # waited out until its x-ratelimit-reset.
        (
            lambda: {
                "status": 403,
                "remaining": 0,
                "reset": int(time.time()) + 3,
                "path_contains": "/deliveries",
                "method": "GET",
                "after": 1,
            },
            (1.5, 3.0),
        ),
        # A secondary rate limit on the fifth redelivery, with its Retry-After.
        (
            lambda: {"status": 429, "retry_after": 7, "path_contains": "/attempts", "after": 4},
            (7.0, 7.0),
        ),
    ],
    ids=["403-spent-quota", "429-retry-after"],
)
def test_a_rate_limit_mid_run_is_waited_out_as_github_says(runtime, router, github, fault, waits):
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = lost_deliveries(github, hook_id, 150)
    slept: list[float] = []
    patient = reconciler_with(runtime, sleep=slept.append)
    github.script(**fault())

    run = patient.run(endpoint, RunRequest(trigger="cli", requested_by="test"))

    assert (run["status"], run["redeliveries"], run["api_errors"]) == ("finished", 150, 1)
    [waited] = slept
    assert waits[0] <= waited <= waits[1]
    assert state_of(runtime, endpoint).errors_total == {"rate_limited": 1}
    # The call the limit refused was made again, and nothing was asked twice.
    assert run["requests"] == 2 + 150 + 1
    assert_asked_once_each(github, hook_id, lost)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id)
    assert_each_ran_once(runtime, ran, lost)


@pytest.mark.parametrize(("status", "reason", "words"), [(422, "invalid", "Validation")])
def test_a_redelivery_refused_for_one_delivery_is_passed_over_and_the_others_asked_for(
    runtime, router, github, caplog, status, reason, words
):
    """GitHub refuses to redeliver one delivery (422): the run says which and why, asks
    for every other, and moves the cursor on, so the deliveries after it are not held
    behind it."""
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
    github.script(422, times=10, path_contains=f"/deliveries/{attempt}/attempts")
    first = run_now(runtime, endpoint)
    later = lost_deliveries(github, hook_id, 2, branch="later")

    second = run_now(runtime, endpoint)

    assert (first["status"], first["redeliveries"]) == ("finished", 2)
    # The refused one is still within the overlap: asked once more, and passed over again.
    assert (second["status"], second["missing"], second["redeliveries"]) == ("finished", 3, 2)
    assert gone in second["error"]
    assert state_of(runtime, endpoint).errors_total == {"invalid": 2}
    assert_asked_once_each(github, hook_id, rest + later)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id, passed_over=[gone])
    assert_each_ran_once(runtime, ran, rest + later)


@pytest.mark.parametrize(
    ("fault", "budget", "reason"),
    [
        (None, {"max_requests": 1 + 4}, "budget_requests"),
        # A 403 with the quota spent, resetting in an hour: longer than the run may wait.
        ({"status": 403, "remaining": 0}, {}, "rate_limited"),
        # The token may read the hook's deliveries but not redeliver them.
        ({"status": 403}, {}, "forbidden"),
        ({"status": 502, "times": 3}, {}, "server_error"),
        # The repository renamed: a 301 concerns every call, not that one delivery.
        ({"status": 301}, {}, "not_found"),
        # GitHub's answer to a token without access, or for a hook deleted meanwhile.
        ({"status": 404}, {}, "not_found"),
    ],
    ids=["budget", "rate-limit", "forbidden", "502", "301", "404"],
)
def test_a_run_stopped_among_its_redeliveries_leaves_the_rest_to_the_next_once_each(
    runtime, router, github, fault, budget, reason
):
    """An error of the whole API (or the budget spent) after four redeliveries stops the
    run: the cursor stays, and the next run asks for exactly the six left."""
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = lost_deliveries(github, hook_id, 10)
    if fault is not None:
        github.script(**fault, path_contains="/attempts", after=4)
    stopping = reconciler_with(runtime, sleep=lambda _: None, **budget)

    cut = stopping.run(endpoint, RunRequest(trigger="cli", requested_by="test"))

    assert (cut["status"], cut["stop_reason"]) == ("cut_short", reason)
    assert cut["redeliveries"] == 4
    asked = asked_for(github, hook_id)
    assert sum(asked.values()) == 4 and set(asked) <= set(lost)
    assert state_of(runtime, endpoint).cursor is None
    assert state_of(runtime, endpoint).resume is None

    resumed = run_now(runtime, endpoint)

    assert (resumed["status"], resumed["missing"], resumed["redeliveries"]) == ("finished", 6, 6)
    assert_asked_once_each(github, hook_id, lost)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id)
    assert_each_ran_once(runtime, ran, lost)


def test_a_run_stopped_among_its_redeliveries_keeps_the_page_an_earlier_run_left(
    runtime, router, github
):
    """The first run reads one page (its page budget) and asks for what it lists, leaving
    the next page to go on from; the second goes on from there and runs out of requests
    among its redeliveries; the third goes on from the same page again, finds those the
    second asked for stored, and asks for the rest. No page is skipped, none asked twice."""
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = lost_deliveries(github, hook_id, 150)
    one_page = reconciler_with(runtime, max_pages=1)
    few_requests = reconciler_with(runtime, max_requests=1 + 20)

    first = one_page.run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    second = few_requests.run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    third = run_now(runtime, endpoint)

    assert (first["stop_reason"], first["redeliveries"]) == ("budget_pages", 100)
    assert (second["stop_reason"], second["redeliveries"]) == ("budget_requests", 20)
    assert (third["status"], third["present"], third["redeliveries"]) == ("finished", 20, 30)
    listings = [r for r in github.requests if r.method == "GET" and r.path.endswith("/deliveries")]
    assert len(listings) == 3 and "cursor" not in listings[0].query
    assert listings[1].query["cursor"] == listings[2].query["cursor"]
    # The cursor moves to when the first run's listing began.
    cursor = state_of(runtime, endpoint).cursor
    assert cursor is not None
    assert str(first["started_at"]) <= cursor.isoformat() < str(second["started_at"])
    assert_asked_once_each(github, hook_id, lost)
    assert_cursor_behind_what_was_asked(runtime, endpoint, github, hook_id)
    assert_each_ran_once(runtime, ran, lost)
    assert GITHUB_TOKEN not in json.dumps([first, second, third])
