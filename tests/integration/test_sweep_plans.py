"""The sweep's queries stay linear in the work waiting, with or without planner
statistics: a burst is swept before autovacuum has analysed it, and some servers run
with autovacuum off."""

import json

import pytest
from rq import Queue
from sqlalchemy import event

from tests.support.pipeline import make_endpoint
from tests.support.relay import relay_for

# Which plan a planner without statistics picks changes with the backlog's size.
SIZES = [300, 1000, 2500, 5000]


def pending_events(runtime, connection, n):
    """``n`` pending events of a new endpoint, written by SQL into emptied tables, their
    statistics reset as a TRUNCATE leaves them."""
    endpoint, _ = make_endpoint(runtime)
    connection.exec_driver_sql(
        "TRUNCATE attempts, outbox, replays, replay_batch_items, ordering_keys, forwards, events "
        "RESTART IDENTITY"
    )
    connection.exec_driver_sql(
        "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts,"
        " body, headers, body_sha256, received_at, next_attempt_at, mismatched_duplicates)"
        " SELECT %(endpoint)s, 'stripe', 'evt_' || g, 'invoice.paid', 'pending', 0,"
        " '\\x7b7d', '{}', 'x', now(), now(), 0 FROM generate_series(1, %(n)s) g",
        {"endpoint": endpoint, "n": n},
    )


def pending_events_with_their_outbox_rows(runtime, n):
    """``n`` pending events already handed to jobs."""
    with runtime.engine.begin() as connection:
        pending_events(runtime, connection, n)
        connection.exec_driver_sql(
            "INSERT INTO outbox (event_id, created_at, job_id, dispatched_at)"
            " SELECT id, now(), 'job-' || (id / 5), now() FROM events"
        )


def statements_of(runtime, call):
    seen = []

    def record(conn, cursor, statement, parameters, *args):
        seen.append((statement, parameters))

    event.listen(runtime.engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(runtime.engine, "before_cursor_execute", record)
    return seen


def rows_read(runtime, statement, parameters):
    """Rows that scans and materialised results returned, over all their loops, and rows
    a join filter removed, when PostgreSQL runs ``statement`` (in a transaction rolled
    back)."""
    with runtime.engine.connect() as connection:
        transaction = connection.begin()
        try:
            [[plan]] = connection.exec_driver_sql(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters
            ).all()
        finally:
            transaction.rollback()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    total = 0

    def walk(node):
        nonlocal total
        if "Scan" in node["Node Type"] or node["Node Type"] == "Materialize":
            total += node["Actual Rows"] * node["Actual Loops"]
        total += node.get("Rows Removed by Join Filter", 0)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return total


@pytest.mark.parametrize("pending", SIZES)
def test_finding_due_work_reads_each_pending_event_once_not_every_outbox_row_each(runtime, pending):
    """Without statistics the planner paired the outbox's replay_id index, NULLs and all,
    with its event_id index, or ran the outbox's whole table once per event: each pending
    event read every outbox row (4 million rows for 2,000 events, a quarter of a second
    of PostgreSQL's CPU each sweep, every sweep)."""
    pending_events_with_their_outbox_rows(runtime, pending)
    relay, _ = relay_for(runtime)
    statements = statements_of(runtime, relay.sweep._sweep_due)
    [(due, parameters)] = [s for s in statements if "NOT (EXISTS" in s[0]][:1]
    assert rows_read(runtime, due, parameters) <= 10 * pending


@pytest.mark.parametrize("pending", SIZES)
def test_no_query_of_a_sweep_reads_more_than_a_few_rows_per_outbox_row(runtime, pending):
    pending_events_with_their_outbox_rows(runtime, pending)
    relay, _ = relay_for(runtime)
    statements = statements_of(runtime, relay.sweep.once)
    reads = [s for s in statements if s[0].lstrip().upper().startswith(("SELECT", "INSERT"))]
    assert len(reads) >= 3
    for statement, parameters in reads:
        assert rows_read(runtime, statement, parameters) <= 10 * pending, statement


@pytest.mark.parametrize("waiting", [1000, 5000])
def test_with_a_live_job_queued_the_relay_finds_replays_without_reading_the_live_backlog(
    runtime, waiting
):
    """While a live job waits for the workers, the relay looks for replays alone (their
    own queue may be free). Through the index of every row not handed out, that read the
    whole live backlog (an outage's) at every poll to find the few replays behind it."""
    with runtime.engine.begin() as connection:
        pending_events(runtime, connection, waiting)
        connection.exec_driver_sql(
            "INSERT INTO outbox (event_id, created_at) SELECT id, now() FROM events ORDER BY id"
        )
        connection.exec_driver_sql(
            "INSERT INTO replays (event_id, requested_by, requested_at, status)"
            " SELECT id, 'alice', now(), 'pending' FROM events WHERE id <= 3"
        )
        connection.exec_driver_sql(
            "INSERT INTO outbox (event_id, replay_id, created_at)"
            " SELECT event_id, id, now() FROM replays"
        )
    relay, queue = relay_for(runtime)
    queue.connection.rpush(queue.key, "a-live-job-waiting")

    statements = statements_of(runtime, relay.relay_once)

    # The fetched lane's poll and the replays': neither reads the live backlog.
    polls = [s for s in statements if "FROM outbox" in s[0]]
    assert len(polls) == 2 and any("replay_id IS NOT NULL" in select for select, _ in polls)
    for select, parameters in polls:
        assert rows_read(runtime, select, parameters) <= 10, select


@pytest.mark.parametrize("waiting", [1000, 5000])
def test_with_a_fetched_job_queued_the_relay_finds_live_rows_without_reading_the_fetched_backlog(
    runtime, waiting
):
    """A reconcile's catch-up leaves thousands of fetched rows waiting behind their lane's
    queued job; the live poll, at every pass, finds the few live rows past them through
    its own index."""
    with runtime.engine.begin() as connection:
        pending_events(runtime, connection, waiting + 3)
        connection.exec_driver_sql(
            "INSERT INTO outbox (event_id, created_at, fetched)"
            " SELECT id, now(), id <= %(fetched)s FROM events ORDER BY id",
            {"fetched": waiting},
        )
    relay, queue = relay_for(runtime)
    fetched_queue = runtime.settings.fetched_queue_name
    queue.connection.rpush(Queue(fetched_queue, connection=queue.connection).key, "a-fetched-job")

    statements = statements_of(runtime, relay.relay_once)

    polls = [s for s in statements if "FROM outbox" in s[0]]
    assert len(polls) == 2  # the live lane's and the replays'
    for select, parameters in polls:
        assert rows_read(runtime, select, parameters) <= 10, select
