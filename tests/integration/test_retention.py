"""Retention: payloads go after one clock, rows after the other, work in hand never.

Events are delivered through the real view by an app whose clock stands at FIRST_SEEN;
cleanup runs as if days had passed, by a runtime whose clock stands later.
"""

import json
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from hooklatch.events.replay import request_replay
from hooklatch.operations import access
from hooklatch.operations.retention import Retention
from tests.support.cli import run_cli
from tests.support.database import count, load_event
from tests.support.pipeline import drain, make_endpoint, wait_for
from tests.support.signing import github_headers, stripe_event, stripe_headers
from tests.support.tokens import AUTH

FIRST_SEEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
PAYLOAD_EXPIRED = FIRST_SEEN + timedelta(days=7, minutes=1)  # default payload clock: 7 days
DEDUPE_EXPIRED = FIRST_SEEN + timedelta(days=30, minutes=1)  # default dedupe clock: 30 days


def post(client, endpoint, external_id, at=FIRST_SEEN, event_type="invoice.paid"):
    body = stripe_event(external_id, event_type=event_type)
    headers = stripe_headers(body, "whsec_test_secret", timestamp=int(at.timestamp()))
    return client.post(f"/hooks/{endpoint}", data=body, headers=headers)


def cleanup_at(runtime, now, **changes):
    settings = replace(runtime.settings, **changes)
    return Retention(replace(runtime, clock=lambda: now, settings=settings))


def received(client_at, runtime, endpoint, *external_ids):
    """Events delivered at FIRST_SEEN, processed, and their stored ids."""
    client, _ = client_at(FIRST_SEEN)
    ids = []
    for external_id in external_ids:
        response = post(client, endpoint, external_id)
        assert response.status_code == 200, response.json
        ids.append(response.json["events"][0]["id"])
    drain(runtime)
    return ids


def set_status(runtime, event_id, status):
    with runtime.engine.begin() as c:
        c.execute(text("UPDATE events SET status = :s WHERE id = :i"), {"s": status, "i": event_id})


def test_payloads_of_finished_events_are_pruned_and_a_late_retry_is_still_a_duplicate(
    runtime, client_at
):
    endpoint, _ = make_endpoint(runtime)
    processed, ignored, dead = received(client_at, runtime, endpoint, "evt_p", "evt_i", "evt_d")
    set_status(runtime, ignored, "ignored")
    set_status(runtime, dead, "dead")
    digest = load_event(runtime, processed).body_sha256

    assert cleanup_at(runtime, FIRST_SEEN + timedelta(days=6)).once().pruned == 0
    done = cleanup_at(runtime, PAYLOAD_EXPIRED).once()

    assert (done.pruned, done.deleted) == (2, 0)
    # Read with SQL: through the ORM a JSON 'null' and an SQL NULL both load as None.
    gone = "SELECT count(*) FROM events WHERE id = :i AND body IS NULL AND headers IS NULL"
    for event_id in (processed, ignored):
        assert count(runtime, gone, i=event_id) == 1
        event = load_event(runtime, event_id)
        assert event.external_id and event.body_sha256
    assert load_event(runtime, processed).body_sha256 == digest
    assert load_event(runtime, dead).body is not None  # dead events keep theirs
    assert count(runtime, "SELECT count(*) FROM attempts WHERE event_id = :i", i=processed) == 1

    client, _ = client_at(PAYLOAD_EXPIRED)
    again = post(client, endpoint, "evt_p", PAYLOAD_EXPIRED)
    assert again.status_code == 200
    assert again.json["status"] == "duplicate"
    assert again.json["events"][0]["id"] == processed
    assert count(runtime, "SELECT count(*) FROM events") == 3

    # Past the dedupe clock every one of them goes, the dead one with its payload.
    assert cleanup_at(runtime, DEDUPE_EXPIRED).once().deleted == 3
    assert count(runtime, "SELECT count(*) FROM events") == 0


def test_an_event_past_the_dedupe_clock_goes_with_its_history_and_is_new_again(
    runtime, client_at, client
):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = received(client_at, runtime, endpoint, "evt_old")
    replayed = client.post(
        f"/admin/events/{event_id}/replay",
        json={"reason": "check"},
        headers=AUTH,
    )
    assert replayed.status_code == 202
    drain(runtime)
    assert count(runtime, "SELECT count(*) FROM attempts") == 2
    assert count(runtime, "SELECT count(*) FROM replays") == 1

    assert cleanup_at(runtime, DEDUPE_EXPIRED - timedelta(minutes=2)).once().deleted == 0
    done = cleanup_at(runtime, DEDUPE_EXPIRED).once()

    assert done.deleted == 1
    for table in ("events", "attempts", "replays", "outbox"):
        assert count(runtime, f"SELECT count(*) FROM {table}") == 0, table  # noqa: S608
    later, _ = client_at(DEDUPE_EXPIRED)
    again = post(later, endpoint, "evt_old", DEDUPE_EXPIRED)
    assert again.json["status"] == "accepted"
    assert again.json["events"][0]["id"] != event_id


def test_work_in_hand_is_never_cleaned(runtime, client_at):
    endpoint, _ = make_endpoint(runtime)
    (with_replay,) = received(client_at, runtime, endpoint, "evt_replay")
    client, _ = client_at(FIRST_SEEN)
    waiting = post(client, endpoint, "evt_waiting").json["events"][0]["id"]  # not drained
    token = AUTH
    replayed = client.post(f"/admin/events/{with_replay}/replay", json={}, headers=token)
    assert replayed.status_code == 202

    done = cleanup_at(runtime, DEDUPE_EXPIRED).once()

    assert (done.pruned, done.deleted) == (0, 0)
    # Not a backlog of cleanup's: the figure that says cleanup falls behind stays 0.
    assert done.oldest_expired_seconds == 0
    for event_id in (with_replay, waiting):
        assert load_event(runtime, event_id).body is not None
    assert count(runtime, "SELECT count(*) FROM outbox") == 2


def test_the_oldest_expired_row_left_says_how_far_past_its_clock_it_is(runtime, client_at):
    """The figure that says cleanup falls behind ingest: rows it has not reached yet, by
    how long they have been past their clock."""
    endpoint, _ = make_endpoint(runtime)
    received(client_at, runtime, endpoint, "evt_a", "evt_b", "evt_c")
    late = PAYLOAD_EXPIRED + timedelta(days=1)
    past_clock = (late - timedelta(days=7) - FIRST_SEEN).total_seconds()

    dry = cleanup_at(runtime, late).once(dry_run=True)

    assert dry.pruned == 3
    assert dry.oldest_expired_seconds == pytest.approx(past_clock, abs=5)
    done = cleanup_at(runtime, late).once()
    assert (done.pruned, done.oldest_expired_seconds) == (3, 0)


def test_a_pass_told_to_stop_ends_between_two_batches(runtime, client_at):
    endpoint, _ = make_endpoint(runtime)
    received(client_at, runtime, endpoint, "evt_a", "evt_b", "evt_c")
    asked = []

    def stop():  # asked before each batch: the third time, after the first payload batch
        asked.append(1)
        return len(asked) > 2

    stopped = cleanup_at(runtime, PAYLOAD_EXPIRED, cleanup_batch_size=1).once(stop=stop)

    assert (stopped.deleted, stopped.pruned, stopped.batches) == (0, 1, 2)
    assert cleanup_at(runtime, PAYLOAD_EXPIRED).once().pruned == 2


def test_a_replay_waiting_without_its_outbox_row_is_work_in_hand(runtime, client_at):
    """A job that found the replay held by another worker deletes its outbox row; if that
    worker then dies, the replay waits without one until the sweep writes a new row."""
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = received(client_at, runtime, endpoint, "evt_replay_waits")
    with runtime.session_factory.begin() as session:
        request_replay(session, event_id, requested_by="test", reason="x", now=FIRST_SEEN)
    with runtime.engine.begin() as c:
        c.execute(text("DELETE FROM outbox"))

    for now in (PAYLOAD_EXPIRED, DEDUPE_EXPIRED):
        done = cleanup_at(runtime, now).once()
        assert (done.pruned, done.deleted) == (0, 0)
    kept = "SELECT count(*) FROM events WHERE id = :i AND body IS NOT NULL"
    assert count(runtime, kept, i=event_id) == 1
    assert count(runtime, "SELECT count(*) FROM replays WHERE status = 'pending'") == 1


def test_a_retry_waiting_for_its_time_is_work_in_hand_without_an_outbox_row(
    runtime, client_at, router
):
    """A failed attempt deletes the event's outbox row and leaves it pending until its
    retry comes due, when the relay's sweep writes a new row: only its status says that
    work is in hand in between."""

    @router.on("stripe", "invoice.payment_failed")
    def fail(event, ctx):
        raise RuntimeError("the handler fails on purpose")

    endpoint, _ = make_endpoint(runtime)
    client, at_first_seen = client_at(FIRST_SEEN)
    answer = post(client, endpoint, "evt_retry", event_type="invoice.payment_failed")
    event_id = answer.json["events"][0]["id"]
    attempted = "SELECT count(*) FROM attempts WHERE event_id = :i"
    # The clock stands at FIRST_SEEN: the retry is scheduled after it, so never swept.
    drain(at_first_seen, until=lambda: count(runtime, attempted, i=event_id) == 1)
    waiting = load_event(runtime, event_id)
    assert (waiting.status, waiting.attempts) == ("pending", 1)
    assert waiting.next_attempt_at > FIRST_SEEN
    assert count(runtime, "SELECT count(*) FROM outbox") == 0

    done = cleanup_at(runtime, DEDUPE_EXPIRED).once()

    assert (done.pruned, done.deleted) == (0, 0)
    assert done.oldest_expired_seconds == 0
    kept = "SELECT count(*) FROM events WHERE id = :i AND body IS NOT NULL AND headers IS NOT NULL"
    assert count(runtime, kept, i=event_id) == 1


def test_a_pruned_event_cannot_be_replayed_and_says_why(runtime, client_at, client, settings):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = received(client_at, runtime, endpoint, "evt_gone")
    cleanup_at(runtime, PAYLOAD_EXPIRED).once()

    answer = client.post(
        f"/admin/events/{event_id}/replay",
        json={"reason": "again"},
        headers=AUTH,
    )
    assert answer.status_code == 409
    assert answer.json["error"] == "payload_pruned"
    shown = client.get(f"/admin/events/{event_id}", headers=AUTH)
    assert shown.json["payload_pruned"] is True
    assert "deleted by retention" in answer.json["message"]
    assert '"payload_pruned": true' in run_cli(settings, "events", "show", str(event_id)).output
    result = run_cli(settings, "events", "replay", str(event_id), "--reason", "again", ok=False)
    assert result.exit_code == 1
    assert "deleted by retention" in result.output
    assert count(runtime, "SELECT count(*) FROM replays") == 0


def waiting_for_a_lock(runtime):
    """Whether a session of this database waits for a row lock another one holds."""
    return count(
        runtime,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'",
    )


@pytest.mark.parametrize(
    ("now", "step", "refusal"),
    [
        (DEDUPE_EXPIRED, Retention._delete_events, (404, "not_found")),
        (PAYLOAD_EXPIRED, Retention._prune_payloads, (409, "payload_pruned")),
    ],
    ids=["delete", "prune"],
)
def test_a_replay_requested_while_a_cleanup_batch_holds_its_event_waits_and_is_refused(
    runtime, client_at, client, now, step, refusal
):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = received(client_at, runtime, endpoint, "evt_raced")
    retention = cleanup_at(runtime, now)
    payload_cutoff, dedupe_cutoff = retention.cutoffs(now)
    cutoff = dedupe_cutoff if step is Retention._delete_events else payload_cutoff
    answers = []

    def replay():
        answers.append(client.post(f"/admin/events/{event_id}/replay", json={}, headers=AUTH))

    replaying = threading.Thread(target=replay)
    with runtime.session_factory.begin() as batch:
        assert step(retention, batch, cutoff) == 1  # claimed and changed, not committed
        replaying.start()
        wait_for(
            lambda: waiting_for_a_lock(runtime),
            timeout=10,
            message="the replay request waiting for the batch's lock",
        )
    replaying.join(timeout=20)

    assert not replaying.is_alive(), "the replay request did not finish after the batch"
    assert (answers[0].status_code, answers[0].json["error"]) == refusal
    for table in ("replays", "outbox"):
        assert count(runtime, f"SELECT count(*) FROM {table}") == 0, table  # noqa: S608


def test_a_replay_being_requested_holds_its_event_back_from_a_cleanup_pass(runtime, client_at):
    endpoint, _ = make_endpoint(runtime)
    (event_id,) = received(client_at, runtime, endpoint, "evt_raced")
    passes = []
    cleaning = threading.Thread(
        target=lambda: passes.append(cleanup_at(runtime, DEDUPE_EXPIRED).once())
    )
    with runtime.session_factory.begin() as session:
        replay = request_replay(
            session, event_id, requested_by="test", reason="race", now=DEDUPE_EXPIRED
        )
        replay_id = replay.id
        cleaning.start()
        cleaning.join(timeout=20)
        waited = cleaning.is_alive()
    cleaning.join()

    assert not waited, "the pass waited for the event the replay request holds"
    assert (passes[0].pruned, passes[0].deleted) == (0, 0)
    drain(runtime)
    status = "SELECT status FROM replays WHERE id = :i"
    with runtime.engine.connect() as c:
        assert c.execute(text(status), {"i": replay_id}).scalar_one() == "succeeded"
    kept = "SELECT count(*) FROM events WHERE id = :i AND body IS NOT NULL AND headers IS NOT NULL"
    assert count(runtime, kept, i=event_id) == 1
    assert count(runtime, "SELECT count(*) FROM attempts WHERE replay_id = :i", i=replay_id) == 1


def test_a_pass_works_through_a_backlog_in_batches(runtime, client_at):
    endpoint, _ = make_endpoint(runtime)
    received(client_at, runtime, endpoint, *(f"evt_{n}" for n in range(7)))

    done = cleanup_at(runtime, DEDUPE_EXPIRED, cleanup_batch_size=2).once()

    assert done.deleted == 7
    assert done.batches >= 4 + 1 + 1 + 1  # 2+2+2+1 events, then one each for the rest
    assert count(runtime, "SELECT count(*) FROM events") == 0


def test_rows_another_transaction_holds_are_skipped_not_waited_for(runtime, client_at):
    endpoint, _ = make_endpoint(runtime)
    held, *_ = received(client_at, runtime, endpoint, "evt_a", "evt_b", "evt_c")
    passes = []
    with runtime.engine.connect() as other:
        other.execute(text("SELECT id FROM events WHERE id = :i FOR UPDATE"), {"i": held})
        cleaning = threading.Thread(
            target=lambda: passes.append(cleanup_at(runtime, DEDUPE_EXPIRED).once())
        )
        cleaning.start()
        cleaning.join(timeout=20)
        waited = cleaning.is_alive()
        other.rollback()
    cleaning.join()

    assert not waited, "the pass waited for a row another transaction holds"
    assert passes[0].deleted == 2
    assert count(runtime, "SELECT count(*) FROM events") == 1
    assert cleanup_at(runtime, DEDUPE_EXPIRED).once().deleted == 1


def test_refusal_counts_and_silent_heartbeats_follow_their_clocks(runtime):
    old, recent = FIRST_SEEN, DEDUPE_EXPIRED - timedelta(days=1)
    endpoint, _ = make_endpoint(runtime)
    with runtime.engine.begin() as c:
        for reason, last in (("bad_signature", old), ("stale_timestamp", recent)):
            c.execute(
                text(
                    "INSERT INTO refusals (endpoint_id, reason, count, first_at, last_at) "
                    "VALUES (:e, :r, 5, :t, :t)"
                ),
                {"e": endpoint, "r": reason, "t": last},
            )
        silent = DEDUPE_EXPIRED - timedelta(days=2)
        for name, beat in (("relay/a/1", silent), ("relay/a/2", recent)):
            c.execute(
                text(
                    "INSERT INTO heartbeats (id, kind, hostname, pid, started_at, beat_at) "
                    "VALUES (:n, 'relay', 'a', 1, :b, :b)"
                ),
                {"n": name, "b": beat},
            )

    dry = cleanup_at(runtime, DEDUPE_EXPIRED).once(dry_run=True)
    assert (dry.deleted_refusals, dry.deleted_heartbeats) == (1, 1)
    assert count(runtime, "SELECT count(*) FROM refusals") == 2

    done = cleanup_at(runtime, DEDUPE_EXPIRED).once()
    assert (done.deleted_refusals, done.deleted_heartbeats) == (1, 1)
    assert count(runtime, "SELECT count(*) FROM refusals WHERE reason = 'stale_timestamp'") == 1
    assert count(runtime, "SELECT count(*) FROM heartbeats WHERE id = 'relay/a/2'") == 1


def test_deleting_a_replay_finds_its_attempts_by_index_not_by_reading_them_all(runtime):
    """Deleting an event deletes its replays, and PostgreSQL then sets replay_id to NULL
    on their attempts (the foreign key's ON DELETE SET NULL), one statement per replay:
    without an index, each read every attempt of the last 30 days."""
    endpoint, _ = make_endpoint(runtime)
    with runtime.engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts,"
            " body, headers, body_sha256, received_at, next_attempt_at, mismatched_duplicates)"
            " SELECT %(endpoint)s, 'stripe', 'evt_' || g, 'invoice.paid', 'processed', 1,"
            " '\\x7b7d', '{}', 'x', now(), now(), 0 FROM generate_series(1, 20000) g",
            {"endpoint": endpoint},
        )
        c.exec_driver_sql(
            "INSERT INTO attempts (event_id, number, outcome, handlers, started_at, finished_at)"
            " SELECT id, 1, 'succeeded', '', now(), now() FROM events"
        )
    with runtime.engine.connect() as c, c.begin() as transaction:
        [[plan]] = c.exec_driver_sql(
            "EXPLAIN (ANALYZE, FORMAT JSON) UPDATE attempts SET replay_id = NULL"
            " WHERE replay_id = 1"
        ).all()
        transaction.rollback()
    scan = plan[0]["Plan"]["Plans"][0]
    examined = scan["Actual Rows"] + scan.get("Rows Removed by Filter", 0)
    assert examined < 100, scan


def test_ordering_keys_idle_past_the_dedupe_clock_go_unless_a_dead_event_parks_them(runtime):
    endpoint, _ = make_endpoint(runtime)
    old, recent = FIRST_SEEN, DEDUPE_EXPIRED - timedelta(days=1)
    with runtime.engine.begin() as c:
        dead = c.execute(
            text(
                "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts,"
                " body, headers, body_sha256, received_at, next_attempt_at,"
                " mismatched_duplicates, ordering_key, ordering_position)"
                " VALUES (:e, 'stripe', 'evt_dead', 't', 'dead', 8, '\\x7b7d', '{}', 'x', :t,"
                " :t, 0, 'cus_parked', 0) RETURNING id"
            ),
            {"e": endpoint, "t": recent},
        ).scalar_one()
        for key, updated, parked in (
            ("cus_idle", old, None),
            ("cus_recent", recent, None),
            ("cus_parked", old, dead),
        ):
            c.execute(
                text(
                    "INSERT INTO ordering_keys (endpoint_id, key, applied_position,"
                    " parked_event_id, updated_at) VALUES (:e, :k, 1, :p, :u)"
                ),
                {"e": endpoint, "k": key, "p": parked, "u": updated},
            )

    assert cleanup_at(runtime, DEDUPE_EXPIRED).once(dry_run=True).deleted_keys == 1
    assert cleanup_at(runtime, DEDUPE_EXPIRED).once().deleted_keys == 1
    assert count(runtime, "SELECT count(*) FROM ordering_keys WHERE key = 'cus_idle'") == 0
    assert count(runtime, "SELECT count(*) FROM ordering_keys") == 2


def test_expired_console_sessions_and_counts_of_failed_token_attempts_are_deleted(runtime):
    """A session past its expiry signs nobody in, and an address's count whose window and
    lockout are over counts nothing: both go. A lockout still running stays."""
    now = FIRST_SEEN
    hour, eight = timedelta(hours=1), timedelta(hours=8)
    locks = replace(runtime.settings, admin_lockout_failures=1, admin_lockout_seconds=7200)
    with runtime.session_factory.begin() as session:
        access.open_session(session, name="yesterday", now=now - 2 * eight, lifetime=eight)
        access.open_session(session, name="today", now=now - hour, lifetime=eight)
        access.count_failure(session, "203.0.113.1", now=now - hour, settings=runtime.settings)
        access.count_failure(session, "203.0.113.2", now=now, settings=runtime.settings)
        access.count_failure(session, "203.0.113.3", now=now - hour, settings=locks)

    planned = cleanup_at(runtime, now).once(dry_run=True)
    assert (planned.deleted_sessions, planned.deleted_token_failures) == (1, 1)
    done = cleanup_at(runtime, now).once()
    assert (done.deleted_sessions, done.deleted_token_failures) == (1, 1)
    with runtime.engine.connect() as c:
        assert c.execute(text("SELECT name FROM console_sessions")).scalars().all() == ["today"]
        left = c.execute(text("SELECT address FROM token_failures ORDER BY address")).scalars()
        assert left.all() == ["203.0.113.2", "203.0.113.3"]


def test_the_first_event_of_an_id_stays_while_a_conflict_of_it_is_younger_than_the_clock(
    runtime, client_at
):
    """A body sent under an unsigned id that was stored first, and the real event under
    it 29 days later, kept apart as a conflict. Deleting the first at its clock would let
    a retry of the conflict be stored as new under the id, and run again."""
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])

    def deliver(at, number):
        client, _ = client_at(at)
        body = json.dumps({"action": "opened", "issue": {"number": number}}).encode()
        headers = github_headers(body, "gh-secret", event="issues", delivery="d-1002")
        return client.post(f"/hooks/{endpoint}", data=body, headers=headers).json

    first = deliver(FIRST_SEEN, 1)["events"][0]["id"]
    early = deliver(FIRST_SEEN + timedelta(seconds=30), 7)["events"][0]["id"]
    later = FIRST_SEEN + timedelta(days=29)
    conflict = deliver(later, 1002)["events"][0]["id"]
    drain(runtime)

    # The first stays; an old conflict goes on its own clock, as any event.
    assert cleanup_at(runtime, DEDUPE_EXPIRED).once().deleted == 1
    assert load_event(runtime, early) is None and load_event(runtime, first) is not None
    retry = deliver(DEDUPE_EXPIRED, 1002)  # the provider retries the real event
    assert (retry["status"], retry["events"][0]["id"]) == ("duplicate", conflict)

    gone = later + timedelta(days=30, minutes=1)
    assert cleanup_at(runtime, gone).once().deleted == 2  # then the first, and the last
    assert (
        count(runtime, "SELECT count(*) FROM events WHERE id IN (:a, :b)", a=first, b=conflict) == 0
    )
