"""Reconcile against GitHub (push): the hook's delivery history is read back, grouped by
delivery id, and each delivery that never succeeded and is not stored is redelivered once;
the redelivery arrives signed through the verified path. Against FakeGitHub, a local
server that answers as GitHub's REST API description says."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from urllib.parse import urlsplit

import requests
from sqlalchemy import select

from hooklatch.events.models import Event
from hooklatch.providers.remote import Place
from hooklatch.reconcile.models import ProviderHook, ReconcileState
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import reconciler
from hooklatch.services.provider_side import NewRegistration, add_registered
from tests.support.fake_github import FakeGitHub
from tests.support.pipeline import drain, runs_of
from tests.support.reconcile import reconciler_with, second_run
from tests.support.tokens import GITHUB_TOKEN as TOKEN

SCOPE = "repos/acme/shop"


def registered(runtime, github, *, token=TOKEN):
    """A GitHub endpoint registered with FakeGitHub through the service every face uses."""
    new = NewRegistration(
        provider="github",
        name="shop",
        credential={"token": token},
        event_types=["push", "issues"],
        place=Place(api_url=github.url, scope=SCOPE),
    )
    made = add_registered(runtime, new, actor="test")
    return made["id"], int(hook_id_of(runtime, made["id"]))


def redeliver_by_hand(github, hook_id, guid):
    """What a person does in GitHub's settings: redeliver one failed attempt."""
    [attempt] = [d for d in github.deliveries(hook_id) if d.guid == guid and not d.redelivery]
    answer = requests.post(
        f"{github.url}/{SCOPE}/hooks/{hook_id}/deliveries/{attempt.id}/attempts",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )
    assert answer.status_code == 202


def test_twenty_failed_five_redelivered_by_hand_gives_fifteen_redeliveries(runtime, router, github):
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    failed = []
    for number in range(200):
        fails = number % 10 == 3
        guid = github.deliver(hook_id, "push", {"ref": f"refs/heads/b{number}"}, fail=fails)
        if fails:
            failed.append(guid)
    assert len(failed) == 20
    for guid in failed[:5]:
        redeliver_by_hand(github, hook_id, guid)
    drain(runtime)
    assert len(ran) == 185

    run = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))

    assert run["status"] == "finished", run
    assert (run["listed"], run["missing"], run["present"]) == (200, 15, 0)
    assert run["redeliveries"] == 15
    assert run["pages"] == 3  # 205 attempts, 100 a page
    asked = [r for r in github.requests if r.method == "POST" and r.path.endswith("/attempts")]
    assert len(asked) == 5 + 15  # the five by hand, then the run's
    assert {d.guid for d in github.redeliveries(hook_id)} == set(failed)
    drain(runtime)
    assert len(ran) == 200
    assert set(Counter(ran).values()) == {1}
    with runtime.session_factory() as session:
        stored = session.execute(
            select(Event.external_id, Event.origin, Event.verified_by).where(
                Event.external_id.in_(failed[5:])
            )
        ).all()
    assert len(stored) == 15
    assert {(origin, how) for _, origin, how in stored} == {("webhook", "signature")}


def test_a_second_run_redelivers_nothing_and_a_failed_redelivery_is_asked_again(
    runtime, router, github, client
):
    ran = runs_of(router, "github")
    endpoint, hook_id = registered(runtime, github)
    lost = [
        github.deliver(hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True) for n in range(3)
    ]
    [github.deliver(hook_id, "push", {"ref": f"refs/heads/k{n}"}) for n in range(4)]
    run = reconciler(runtime)
    first = run.run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    assert first["redeliveries"] == 3
    second = run.run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    assert (second["missing"], second["redeliveries"], second["status"]) == (0, 0, "finished")
    drain(runtime)
    assert len(ran) == 7 and set(Counter(ran).values()) == {1}
    with runtime.session_factory() as session:
        state = session.get(ReconcileState, endpoint)
        assert state is not None and state.cursor is not None
        assert state.redeliveries_total == 3 and state.missing_total == 3
    assert len(set(lost)) == 3


def test_a_delivery_stored_here_but_failed_at_github_is_present_not_redelivered(
    runtime, router, github
):
    """GitHub counts an answer slower than 10 s as failed: hooklatch stored the event, so
    it is present, and nothing is asked again."""
    endpoint, hook_id = registered(runtime, github)
    guid = github.deliver(hook_id, "push", {"ref": "refs/heads/slow"})
    [attempt] = github.deliveries(hook_id)
    attempt.status_code, attempt.status = 0, "timed out"
    run = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    assert (run["present"], run["missing"], run["redeliveries"]) == (1, 0, 0)
    assert guid not in {d.guid for d in github.redeliveries(hook_id)}


def test_a_run_keeps_its_lease_while_it_asks_for_redeliveries(runtime, router, client):
    """Each redelivery asked for renews the run's lease: a run whose redeliveries take
    longer in all than its lease still holds the endpoint, and no second run starts."""
    ran = runs_of(router, "github")
    minutes, started = [0], runtime.clock()

    def at_the_minute():
        return reconciler_with(
            runtime,
            clock=lambda: started + timedelta(minutes=minutes[0]),
            lease=timedelta(minutes=2),
        )

    second = at_the_minute()
    tries: list[str] = []

    def send(url, headers, body):
        """Each redelivery takes a minute; at the fourth, a second run tries to start."""
        status = client.post(urlsplit(url).path, data=body, headers=dict(headers)).status_code
        minutes[0] += 1
        if minutes[0] == 4:
            tries.append(second_run(second, endpoint))
        return status

    with FakeGitHub(send=send) as github:
        github.add_token(TOKEN)
        endpoint, hook_id = registered(runtime, github)
        for n in range(6):
            github.deliver(hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True)

        run = at_the_minute().run(endpoint, RunRequest(trigger="cli", requested_by="test"))

    assert tries == ["busy"]
    assert (run["status"], run["redeliveries"]) == ("finished", 6)
    drain(runtime)
    assert len(ran) == 6


def test_a_run_stops_at_the_quota_reserve_and_spends_no_more_of_it(runtime, github):
    """Once GitHub says the credential's quota is down to the reserve, the run stops: it
    asks for no redelivery, leaving the rest to whatever else uses the token, and the next
    run, with quota again, finds what this one did not ask for."""
    endpoint, hook_id = registered(runtime, github)
    lost = [
        github.deliver(hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True) for n in range(150)
    ]
    used = len(github.requests)  # the registration's
    left = github.rate_limit - used - 1  # what GitHub says is left after the first page
    sparing = reconciler_with(runtime, quota_reserve=left)

    stopped = sparing.run(endpoint, RunRequest(trigger="cli", requested_by="test"))

    assert (stopped["status"], stopped["stop_reason"]) == ("cut_short", "quota")
    assert (stopped["requests"], stopped["redeliveries"]) == (1, 0)
    assert github.redeliveries(hook_id) == []
    resumed = reconciler(runtime).run(endpoint, RunRequest(trigger="cli", requested_by="test"))
    assert (resumed["status"], resumed["redeliveries"]) == ("finished", 150)
    assert {d.guid for d in github.redeliveries(hook_id)} == set(lost)


def test_a_dry_run_says_what_it_would_redeliver_and_changes_nothing(runtime, github):
    endpoint, hook_id = registered(runtime, github)
    lost = github.deliver(hook_id, "push", {"ref": "refs/heads/x"}, fail=True)
    run = reconciler(runtime).run(
        endpoint, RunRequest(trigger="cli", requested_by="test", dry_run=True)
    )
    assert (run["missing"], run["redeliveries"], run["sample"]) == (1, 0, [lost])
    assert github.redeliveries(hook_id) == []
    with runtime.session_factory() as session:
        state = session.get(ReconcileState, endpoint)
        assert state is not None and state.cursor is None and state.missing_total == 0


def hook_id_of(runtime, endpoint):
    """The provider's id of the endpoint's webhook, as stored at registration."""
    with runtime.session_factory() as session:
        hook = session.get(ProviderHook, endpoint)
        assert hook is not None and hook.hook_id is not None
        return hook.hook_id
