"""A single replay is refused while the event's handlers are about to run anyway (the
event is pending, or a replay of it waits to run), on every face: the admin API, the
console and the CLI. Each would otherwise run the handlers a second time."""

from __future__ import annotations

import html
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from sqlalchemy import text

from hooklatch.workers.worker.processing import process_chunk
from tests.support.cli import run_cli
from tests.support.console import csrf_of, signed_in
from tests.support.database import count, load_event
from tests.support.effects import effect_rows
from tests.support.handlers import write_effect
from tests.support.pipeline import dead_then_fixed, deliver, drain, make_endpoint, wait_for
from tests.support.tokens import AUTH


def ask_on_every_face(app, settings, event_id):
    """A replay of ``event_id`` asked for through the API, the console and the CLI: the
    API's answer, the console's page after its redirect, and the command's result."""
    api = app.test_client().post(
        f"/admin/events/{event_id}/replay", json={"reason": "run it now"}, headers=AUTH
    )
    console, _ = signed_in(app)
    page = console.get(f"/admin/console/events/{event_id}")
    answer = console.post(
        f"/admin/console/events/{event_id}/replay",
        data={"reason": "run it now", "csrf_token": csrf_of(page)},
        follow_redirects=True,
    )
    cli = run_cli(settings, "events", "replay", str(event_id), "--reason", "run it now", ok=False)
    return api, html.unescape(answer.get_data(as_text=True)), cli


def refused_on_every_face(app, settings, event_id, error):
    """A replay of ``event_id`` asked for on every face is refused: 409 and ``error`` from
    the API, and its message on the console's page and from the CLI. Returns the message."""
    api, page, cli = ask_on_every_face(app, settings, event_id)
    assert (api.status_code, api.json["error"]) == (409, error), api.json
    assert api.json["message"] in page
    assert cli.exit_code == 1
    assert cli.stderr.splitlines() == [f"Error: {api.json['message']}"]
    return api.json["message"]


def test_a_replay_of_a_pending_event_is_refused_on_every_face(app, client, runtime, router):
    """A dead event re-armed by the provider's retry is pending: its handlers run at its
    next attempt. A replay beside it would run them twice."""
    endpoint, event_id = dead_then_fixed(client, runtime, router, "evt_rearmed")
    again = deliver(client, endpoint, "evt_rearmed")  # the provider's retry re-arms it
    assert again == event_id and load_event(runtime, event_id).status == "pending"

    message = refused_on_every_face(app, runtime.settings, event_id, "event_pending")

    assert f"event {event_id} is pending" in message
    assert count(runtime, "SELECT count(*) FROM replays") == 0
    drain(runtime)
    assert load_event(runtime, event_id).status == "processed"
    assert len(effect_rows(runtime, "evt_rearmed")) == 1  # its handler ran once


def test_a_second_replay_while_the_first_waits_is_refused_on_every_face(
    app, client, runtime, router
):
    """A double click, or two people at once: one replay of it is enough."""
    router.on("stripe", "invoice.paid")(write_effect)
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_twice")
    drain(runtime)
    first = client.post(f"/admin/events/{event_id}/replay", json={"reason": "once"}, headers=AUTH)
    assert first.status_code == 202, first.json

    message = refused_on_every_face(app, runtime.settings, event_id, "replay_pending")

    assert f"replay {first.json['id']} of event {event_id}" in message
    assert count(runtime, "SELECT count(*) FROM replays") == 1
    drain(runtime)
    rows = effect_rows(runtime, "evt_twice")
    assert [row.is_replay for row in rows] == [False, True]  # delivered once, replayed once
    # Once it has run, the event may be replayed again.
    later = client.post(f"/admin/events/{event_id}/replay", json={"reason": "again"}, headers=AUTH)
    assert later.status_code == 202, later.json


def test_a_replay_of_an_event_waiting_for_its_retry_is_refused(client, runtime, router):
    """A failing event between two attempts is pending too: its next attempt runs it."""

    @router.on("stripe", "invoice.paid")
    def failing(event, ctx):
        raise RuntimeError("down")

    runtime.settings = replace(runtime.settings, retry_base_seconds=3600, retry_max_seconds=7200)
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_waiting")
    drain(runtime, until=lambda: load_event(runtime, event_id).attempts == 1)
    waiting = load_event(runtime, event_id)
    assert waiting.status == "pending" and waiting.next_attempt_at > runtime.clock()

    api = client.post(f"/admin/events/{event_id}/replay", json={}, headers=AUTH)

    assert (api.status_code, api.json["error"]) == (409, "event_pending"), api.json
    assert waiting.next_attempt_at.strftime("%Y-%m-%d %H:%M:%S") in api.json["message"]
    assert count(runtime, "SELECT count(*) FROM replays") == 0


def test_two_replays_asked_at_once_are_decided_one_after_the_other(app, client, runtime, router):
    """Both requests wait for the event's row lock (held here as a worker would hold it);
    the second sees the first's replay once it has the lock, and is refused."""
    router.on("stripe", "invoice.paid")(write_effect)
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_at_once")
    drain(runtime)
    holder = runtime.engine.connect()
    transaction = holder.begin()
    holder.execute(text("SELECT id FROM events WHERE id = :i FOR UPDATE"), {"i": event_id})

    def ask(_: int) -> int:
        return (
            app.test_client()
            .post(f"/admin/events/{event_id}/replay", json={"reason": "at once"}, headers=AUTH)
            .status_code
        )

    with ThreadPoolExecutor(2) as pool:
        asked = pool.map(ask, range(2))
        wait_for(lambda: waiting_for_locks(runtime) == 2, timeout=10, message="both waiting")
        transaction.rollback()
        answers = sorted(asked)
    holder.close()

    assert answers == [202, 409]
    assert count(runtime, "SELECT count(*) FROM replays") == 1


def waiting_for_locks(runtime) -> int:
    """Sessions of this database waiting for a row lock."""
    return count(
        runtime,
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock'",
    )


def test_a_replay_asked_for_before_a_provider_retry_rearms_the_event_runs_its_handlers_once(
    app, client, runtime, router
):
    """The replay was accepted while the event was dead; the provider's retry then re-arms
    it, and its attempt runs first. The replay, which was for the same run, is skipped."""
    endpoint, event_id = dead_then_fixed(client, runtime, router, "evt_replayed_then_rearmed")
    asked = client.post(f"/admin/events/{event_id}/replay", json={"reason": "fixed"}, headers=AUTH)
    assert asked.status_code == 202, asked.json
    assert deliver(client, endpoint, "evt_replayed_then_rearmed") == event_id  # re-armed
    assert load_event(runtime, event_id).status == "pending"
    with runtime.session_factory.begin() as session:  # the live attempt runs first
        process_chunk(session, runtime, [event_id])
    drain(runtime)
    runs = effect_rows(runtime, "evt_replayed_then_rearmed")
    assert [row.is_replay for row in runs] == [False]  # the retry's (a failed run writes nothing)
    assert count(runtime, "SELECT count(*) FROM replays WHERE status = 'skipped'") == 1
