"""Bulk replay by filter: a dry run that changes nothing, a set frozen when planned and
replayed oldest first at its rate, each event at most once per batch, skips, a cap,
cancelling, the audit log, and the same through the admin API and the CLI."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import timedelta

from sqlalchemy import text

from hooklatch.events import bulk_replays
from hooklatch.events.browse import EventFilter
from tests.support.bulk_replays import begin_bulk_replay, step
from tests.support.cli import run_cli
from tests.support.database import count, load_event
from tests.support.pipeline import deliver, drain, make_dead, make_endpoint
from tests.support.tokens import AUTH


def dead_events(client, runtime, endpoint, *names, event_type="effect.bulk"):
    return make_dead(client, runtime, endpoint, *names, event_type=event_type)


def step_elsewhere(runtime, now):
    """A second relay's step at ``now``, in a thread of its own, waited for up to 10 s: a
    list that holds what it advanced once it has returned."""
    advanced = []
    thread = threading.Thread(target=lambda: advanced.append(step(runtime, now)))
    thread.start()
    thread.join(timeout=10)
    return advanced


def test_a_dry_run_counts_and_shows_the_oldest_and_changes_nothing(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    ids = dead_events(client, runtime, endpoint, "evt_d1", "evt_d2", "evt_d3")
    deliver(client, endpoint, "evt_pending", "effect.bulk")

    answer = client.post("/admin/replays", json={"status": "dead", "dry_run": True}, headers=AUTH)

    assert answer.status_code == 200, answer.json
    assert answer.json["matched"] == 3
    assert [e["id"] for e in answer.json["sample"]] == ids  # oldest first
    for table in ("replay_batches", "replays", "audit_log"):
        assert count(runtime, f"SELECT count(*) FROM {table}") == 0, table  # noqa: S608


def test_a_batch_replays_its_frozen_set_oldest_first_at_its_rate_each_once(client, runtime, router):
    router.on("stripe", "effect.bulk")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    ids = dead_events(client, runtime, endpoint, *[f"evt_b{n}" for n in range(5)])
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, EventFilter(status="dead"), rate=2.0, now=t0)
    late = dead_events(client, runtime, endpoint, "evt_died_after_planning")

    assert step(runtime, t0) == 0  # no time has passed: no replay is due yet
    assert step(runtime, t0 + timedelta(seconds=1)) == 2
    replayed = "SELECT event_id FROM replays WHERE batch_id = :b ORDER BY event_id"
    with runtime.engine.connect() as c:
        assert list(c.execute(text(replayed), {"b": batch_id}).scalars()) == ids[:2]

    # Two relays at the same moment: one holds the batch, the other finds nothing to do.
    with runtime.session_factory.begin() as holder:
        assert bulk_replays.advance(holder, now=t0 + timedelta(seconds=2), window=100) == 2
        other = step_elsewhere(runtime, t0 + timedelta(seconds=2))
    assert other == [0]
    assert step(runtime, t0 + timedelta(seconds=3)) == 1
    assert step(runtime, t0 + timedelta(seconds=9)) == 0

    with runtime.engine.connect() as c:
        assert list(c.execute(text(replayed), {"b": batch_id}).scalars()) == ids  # not `late`
    with runtime.session_factory() as session:
        shown = bulk_replays.describe(session, bulk_replays.get(session, batch_id))
    assert (shown["status"], shown["replayed"], shown["skipped"], shown["left"]) == (
        "done",
        5,
        0,
        0,
    )
    drain(runtime)
    assert [load_event(runtime, i).status for i in ids] == ["processed"] * 5
    assert load_event(runtime, late[0]).status == "dead"
    with runtime.session_factory() as session:
        assert bulk_replays.describe(session, bulk_replays.get(session, batch_id))["replays"] == {
            "succeeded": 5
        }


def test_an_event_that_succeeded_since_the_plan_is_skipped(client, runtime, router):
    router.on("stripe", "effect.bulk")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    first, second = dead_events(client, runtime, endpoint, "evt_s1", "evt_s2")
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, EventFilter(status="dead"), now=t0)
    client.post(f"/admin/events/{first}/replay", json={"reason": "by hand"}, headers=AUTH)
    drain(runtime)  # the one-off replay succeeds before the batch reaches the event
    assert load_event(runtime, first).status == "processed"

    assert step(runtime, t0 + timedelta(seconds=1)) == 2
    with runtime.session_factory() as session:
        shown = bulk_replays.describe(session, bulk_replays.get(session, batch_id))
    assert (shown["replayed"], shown["skipped"]) == (1, 1)
    assert count(runtime, "SELECT count(*) FROM replays WHERE batch_id = :b", b=batch_id) == 1
    assert count(runtime, "SELECT count(*) FROM replays WHERE event_id = :e", e=second) == 1


def test_a_batch_needs_a_reason_and_stays_under_its_cap(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    dead_events(client, runtime, endpoint, "evt_c1", "evt_c2", "evt_c3")

    no_reason = client.post("/admin/replays", json={"status": "dead"}, headers=AUTH)
    assert (no_reason.status_code, no_reason.json["error"]) == (400, "reason_required")
    nothing = client.post(
        "/admin/replays", json={"status": "dead", "provider": "github", "reason": "x"}, headers=AUTH
    )
    assert (nothing.status_code, nothing.json["error"]) == (400, "nothing_matches")

    runtime.settings = replace(runtime.settings, replay_batch_max=2)
    dry = client.post("/admin/replays", json={"status": "dead", "dry_run": True}, headers=AUTH)
    assert dry.json["over_cap"] is True
    over = client.post("/admin/replays", json={"status": "dead", "reason": "x"}, headers=AUTH)
    assert (over.status_code, over.json["error"]) == (400, "over_cap")
    assert "HOOKLATCH_REPLAY_BATCH_MAX" in over.json["message"]
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 0


def test_through_the_api_a_batch_runs_shows_progress_and_is_audited(client, runtime, router):
    router.on("stripe", "effect.bulk")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    ids = dead_events(client, runtime, endpoint, "evt_a1", "evt_a2")
    answer = client.post(
        "/admin/replays",
        json={"status": "dead", "type": "effect.*", "reason": "#42 fixed", "requested_by": "bob"},
        headers=AUTH,
    )
    assert answer.status_code == 202, answer.json
    batch_id = answer.json["id"]
    assert answer.json["matched"] == 2 and answer.json["left"] == 2

    step(runtime, runtime.clock() + timedelta(seconds=5))
    drain(runtime)
    progress = client.get(f"/admin/replays/{batch_id}", headers=AUTH).json
    assert (progress["status"], progress["replays"]) == ("done", {"succeeded": 2})
    assert [load_event(runtime, i).status for i in ids] == ["processed", "processed"]

    [entry] = client.get("/admin/audit", headers=AUTH).json["entries"]
    assert entry["action"] == "bulk_replay" and entry["actor"].startswith("bob")
    assert entry["details"]["filter"] == {"status": "dead", "type": "effect.*"}
    assert entry["details"]["events"] == 2 and entry["details"]["reason"] == "#42 fixed"


def test_a_cancelled_batch_replays_nothing_more(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    dead_events(client, runtime, endpoint, *[f"evt_x{n}" for n in range(4)])
    t0 = runtime.clock()
    batch_id = begin_bulk_replay(runtime, EventFilter(status="dead"), rate=1.0, now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 1

    cancelled = client.post(f"/admin/replays/{batch_id}/cancel", json={}, headers=AUTH)

    assert cancelled.json["status"] == "cancelled"
    assert step(runtime, t0 + timedelta(seconds=5)) == 0
    assert count(runtime, "SELECT count(*) FROM replays") == 1
    actions = client.get("/admin/audit", headers=AUTH).json["entries"]
    assert [e["action"] for e in actions] == ["bulk_replay_cancelled", "bulk_replay"]


def test_the_cli_dry_run_then_replay_by_filter(client, runtime, settings, router):
    router.on("stripe", "effect.bulk")(lambda event, ctx: None)
    endpoint, _ = make_endpoint(runtime)
    ids = dead_events(client, runtime, endpoint, "evt_cli1", "evt_cli2")
    args = ["events", "replay", "--status", "dead", "--provider", "stripe", "--since", "2h"]

    dry = run_cli(settings, *args, "--dry-run").output
    assert "2 events match" in dry and "evt_cli1" in dry
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 0
    refused = run_cli(settings, *args, ok=False)
    assert refused.exit_code == 2 and "--reason is required" in refused.output

    started = run_cli(settings, *args, "--reason", "deploy 1.2.3 fixed it", "--by", "carol").output
    assert "bulk replay 1: 2 events" in started
    step(runtime, runtime.clock() + timedelta(seconds=5))
    drain(runtime)
    assert [load_event(runtime, i).status for i in ids] == ["processed", "processed"]
    shown = run_cli(settings, "events", "batch", "1").output
    assert '"status": "done"' in shown and '"requested_by": "carol (cli)"' in shown


def test_the_set_is_frozen_at_the_dry_run_not_at_the_confirmation(client, runtime):
    """The operator reads the dry run, then confirms an hour later: what died in between
    is not part of the batch they read."""
    endpoint, _ = make_endpoint(runtime)
    seen = dead_events(client, runtime, endpoint, "evt_seen1", "evt_seen2")
    dry = client.post("/admin/replays", json={"status": "dead", "dry_run": True}, headers=AUTH)
    assert dry.json["matched"] == 2 and dry.json["watermark"] >= max(seen)
    dead_events(client, runtime, endpoint, "evt_died_while_reading")

    answer = client.post(
        "/admin/replays",
        json={"status": "dead", "reason": "read and confirmed", "watermark": dry.json["watermark"]},
        headers=AUTH,
    )

    assert answer.status_code == 202, answer.json
    assert answer.json["matched"] == 2
    items = "SELECT event_id FROM replay_batch_items ORDER BY event_id"
    with runtime.engine.connect() as c:
        assert list(c.execute(text(items)).scalars()) == seen
    bad = client.post(
        "/admin/replays",
        json={"status": "dead", "reason": "r", "watermark": "12; DROP TABLE events"},
        headers=AUTH,
    )
    assert bad.status_code == 400 and bad.json["error"] == "bad_parameter"


def test_the_cli_replays_up_to_the_dry_runs_watermark(client, runtime, settings):
    endpoint, _ = make_endpoint(runtime)
    dead_events(client, runtime, endpoint, "evt_cw1")
    args = ["events", "replay", "--status", "dead"]
    dry = run_cli(settings, *args, "--dry-run", "--json").output
    watermark = json.loads(dry)["watermark"]
    assert f"--watermark {watermark}" in run_cli(settings, *args, "--dry-run").output
    dead_events(client, runtime, endpoint, "evt_cw2")

    started = run_cli(settings, *args, "--reason", "r", "--watermark", str(watermark)).output

    assert "bulk replay 1: 1 event," in started


def test_a_batch_needs_a_filter_whatever_posts_it(client, runtime):
    """The console's dry run refuses an empty filter; a confirmation posted without one,
    or the API called without one, would replay everything up to the cap."""
    endpoint, _ = make_endpoint(runtime)
    dead_events(client, runtime, endpoint, "evt_nf1")

    answer = client.post("/admin/replays", json={"reason": "everything"}, headers=AUTH)

    assert answer.status_code == 400 and answer.json["error"] == "filter_required"
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 0


def test_a_reason_is_a_sentence_not_a_document(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = dead_events(client, runtime, endpoint, "evt_long_reason")
    long = "x" * 1001

    one = client.post(f"/admin/events/{event_id}/replay", json={"reason": long}, headers=AUTH)
    bulk = client.post("/admin/replays", json={"status": "dead", "reason": long}, headers=AUTH)

    assert (one.status_code, one.json["error"]) == (400, "reason_too_long")
    assert (bulk.status_code, bulk.json["error"]) == (400, "reason_too_long")
    assert count(runtime, "SELECT count(*) FROM replays") == 0


def test_a_single_replay_is_audited(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = dead_events(client, runtime, endpoint, "evt_one")
    client.post(
        f"/admin/events/{event_id}/replay",
        json={"reason": "try again", "requested_by": "dave"},
        headers=AUTH,
    )
    [entry] = client.get("/admin/audit", headers=AUTH).json["entries"]
    assert (entry["action"], entry["target"]) == ("replay", f"event {event_id}")
    assert entry["actor"].startswith("dave") and entry["details"]["reason"] == "try again"


def test_events_are_listed_by_filter_a_keyset_page_at_a_time(client, runtime):
    stripe, _ = make_endpoint(runtime)
    ids = [deliver(client, stripe, f"evt_l{n}", "invoice.paid") for n in range(5)]
    other = deliver(client, stripe, "evt_other_type", "customer.created")

    first = client.get("/admin/events?type=invoice.*&limit=2", headers=AUTH).json
    assert [e["id"] for e in first["events"]] == [ids[4], ids[3]]
    second = client.get(
        f"/admin/events?type=invoice.*&limit=2&before={first['next']}", headers=AUTH
    ).json
    assert [e["id"] for e in second["events"]] == [ids[2], ids[1]]
    last = client.get(
        f"/admin/events?type=invoice.*&limit=2&before={second['next']}", headers=AUTH
    ).json
    assert ([e["id"] for e in last["events"]], last["next"]) == ([ids[0]], None)

    found = client.get("/admin/events?external_id=evt_other_type", headers=AUTH).json["events"]
    assert [e["id"] for e in found] == [other]
    # SQL's own wildcards in a glob match themselves.
    assert client.get("/admin/events?type=invoice_paid", headers=AUTH).json["events"] == []
    bad = client.get("/admin/events?since=yesterday", headers=AUTH)
    assert (bad.status_code, bad.json["error"]) == (400, "bad_parameter")
    assert "since must be an ISO 8601 time" in bad.json["message"]


def test_a_batch_confirmed_twice_replays_each_event_once(client, runtime):
    """Two batches over the same events (a double click, two people at once): the second
    skips what the first has asked to replay and has not run yet."""
    endpoint, _ = make_endpoint(runtime)
    ids = dead_events(client, runtime, endpoint, "evt_twice_1", "evt_twice_2")
    t0 = runtime.clock()
    first = begin_bulk_replay(runtime, EventFilter(status="dead"), now=t0)
    second = begin_bulk_replay(runtime, EventFilter(status="dead"), now=t0)
    assert step(runtime, t0 + timedelta(seconds=1)) == 2  # the first batch, done
    assert step(runtime, t0 + timedelta(seconds=2)) == 2  # the second, all skipped
    with runtime.session_factory() as session:
        shown = bulk_replays.describe(session, bulk_replays.get(session, second))
    assert (shown["status"], shown["replayed"], shown["skipped"]) == ("done", 0, 2)
    for event_id in ids:
        assert count(runtime, "SELECT count(*) FROM replays WHERE event_id = :e", e=event_id) == 1
    assert first != second


def test_batches_run_one_after_the_other_whatever_the_relays(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    dead_events(client, runtime, endpoint, "evt_one_1", "evt_one_2")
    dead_events(client, runtime, endpoint, "evt_two_1", event_type="effect.other")
    t0 = runtime.clock()
    begin_bulk_replay(runtime, EventFilter(status="dead", type="effect.bulk"), rate=1.0, now=t0)
    later = begin_bulk_replay(
        runtime, EventFilter(status="dead", type="effect.other"), rate=1.0, now=t0
    )
    with runtime.session_factory.begin() as holder:  # one relay advances the oldest batch
        assert bulk_replays.advance(holder, now=t0 + timedelta(seconds=1), window=100) == 1
        other = step_elsewhere(runtime, t0 + timedelta(seconds=1))
    assert other == [0]  # the other relay does not take the next batch meanwhile
    assert count(runtime, "SELECT count(*) FROM replays WHERE batch_id = :b", b=later) == 0


def test_an_event_pending_again_is_skipped(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = dead_events(client, runtime, endpoint, "evt_rearmed")
    t0 = runtime.clock()
    begin_bulk_replay(runtime, EventFilter(status="dead"), now=t0)
    with runtime.engine.begin() as c:  # as a provider's re-send re-arms it
        c.execute(text("UPDATE events SET status = 'pending' WHERE id = :i"), {"i": event_id})
    assert step(runtime, t0 + timedelta(seconds=1)) == 1
    assert count(runtime, "SELECT count(*) FROM replays") == 0
