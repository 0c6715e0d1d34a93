"""The storing statement: one round trip per delivery, prepared once per connection, and
an endpoint cache that never outlives a change of secrets."""

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def post_stripe(client, endpoint, event_id, secret):
    body = stripe_event(event_id)
    return client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret))


def statements_per_delivery(client, runtime, endpoint, event_id, secret):
    from sqlalchemy import event

    seen = []

    def count_statement(*args):
        seen.append(args[2])

    event.listen(runtime.ingest_engine, "before_cursor_execute", count_statement)
    try:
        response = post_stripe(client, endpoint, event_id, secret)
    finally:
        event.remove(runtime.ingest_engine, "before_cursor_execute", count_statement)
    assert response.status_code == 200, response.json
    return len(seen)


def test_a_delivery_to_a_known_endpoint_is_one_statement_duplicate_or_not(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert statements_per_delivery(client, runtime, endpoint, "evt_rt_1", SECRET) == 2
    assert statements_per_delivery(client, runtime, endpoint, "evt_rt_2", SECRET) == 1
    # A duplicate is found by the same statement.
    assert statements_per_delivery(client, runtime, endpoint, "evt_rt_2", SECRET) == 1
    assert count(runtime, "SELECT count(*) FROM events") == 2
    assert count(runtime, "SELECT count(*) FROM outbox") == 2


def test_a_cached_endpoint_sees_secret_changes_and_disabling_at_once(client, runtime):
    from hooklatch.endpoints.service import add_secret, get_endpoint, remove_secret

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert post_stripe(client, endpoint, "evt_c_1", SECRET).status_code == 200
    assert runtime.endpoints.get(endpoint) is not None  # what follows starts from the cache

    with runtime.session_factory.begin() as session:
        add_secret(session, get_endpoint(session, endpoint), "whsec_added", box=runtime.box)
    assert post_stripe(client, endpoint, "evt_c_2", "whsec_added").status_code == 200

    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        remove_secret(session, row, row.secrets[0].fingerprint)
    refused = post_stripe(client, endpoint, "evt_c_3", SECRET)
    assert (refused.status_code, refused.json["error"]) == (401, "bad_signature")

    with runtime.session_factory.begin() as session:
        get_endpoint(session, endpoint).enabled = False
    assert post_stripe(client, endpoint, "evt_c_4", "whsec_added").status_code == 404
    with runtime.engine.connect() as c:
        stored = sorted(r[0] for r in c.exec_driver_sql("SELECT external_id FROM events"))
    assert stored == ["evt_c_1", "evt_c_2"]


def prepared_statements(runtime, name=None):
    """Statements prepared on an ingest connection (the pooled one the view uses): all of
    them, or those called ``name``."""
    with runtime.ingest_connection() as connection:
        return connection.exec_driver_sql(
            "SELECT count(*) FROM pg_prepared_statements WHERE name = coalesce(%(name)s, name)",
            {"name": name},
        ).scalar_one()


def test_ingest_connections_prepare_the_storing_statement_once(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    for n in range(3):
        assert post_stripe(client, endpoint, f"evt_prep_{n}", SECRET).status_code == 200
    assert prepared_statements(runtime, "hooklatch_store") == 1
    assert count(runtime, "SELECT count(*) FROM events") == 3


def test_without_prepared_statements_ingest_still_stores_once(settings, router):
    from dataclasses import replace

    from hooklatch import create_app

    app = create_app(replace(settings, prepare_statements=False), router=router)
    runtime = app.extensions["hooklatch"]
    try:
        endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
        client = app.test_client()
        assert post_stripe(client, endpoint, "evt_plain", SECRET).status_code == 200
        assert post_stripe(client, endpoint, "evt_plain", SECRET).json["status"] == "duplicate"
        assert prepared_statements(runtime) == 0
        assert count(runtime, "SELECT count(*) FROM events") == 1
    finally:
        runtime.dispose()


def test_a_vanished_prepared_statement_is_replaced_not_answered_503(client, runtime):
    """A pooler or DISCARD ALL can drop a connection's prepared statement."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert post_stripe(client, endpoint, "evt_gone_1", SECRET).status_code == 200
    with runtime.ingest_connection() as connection:  # the pooled one the view will reuse
        connection.exec_driver_sql("DEALLOCATE hooklatch_store")
    assert post_stripe(client, endpoint, "evt_gone_2", SECRET).status_code == 200
    assert post_stripe(client, endpoint, "evt_gone_3", SECRET).status_code == 200
    assert count(runtime, "SELECT count(*) FROM events") == 3


def test_a_naive_time_from_a_plugin_is_stored_as_utc(runtime):
    from datetime import datetime

    from hooklatch.endpoints.service import active_endpoint
    from hooklatch.ingest.store import record_events
    from hooklatch.providers.base import IncomingEvent

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    with runtime.ingest_connection() as connection:
        connection.exec_driver_sql("SET TIME ZONE 'America/New_York'")
        active = active_endpoint(connection, endpoint, box=runtime.box)
        record_events(
            connection,
            endpoint=active,
            provider=runtime.provider("stripe"),
            incoming=[IncomingEvent("evt_naive", "x", occurred_at=datetime(2026, 1, 1, 12))],
            headers={},
            body=b"{}",
            now=runtime.clock(),
        )
        connection.exec_driver_sql("SET TIME ZONE 'UTC'")
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql(
            "SELECT occurred_at FROM events WHERE external_id = 'evt_naive'"
        ).scalar_one()
    assert stored.isoformat() == "2026-01-01T12:00:00+00:00"


def endpoint_reads(runtime, send):
    """How many times ``send`` read an endpoint from the database, and what it returned."""
    from sqlalchemy import event

    reads = []

    def seen(conn, cursor, statement, *args):
        if "endpoint_secrets" in statement and statement.lstrip().upper().startswith("SELECT"):
            reads.append(statement)

    event.listen(runtime.ingest_engine, "before_cursor_execute", seen)
    try:
        result = send()
    finally:
        event.remove(runtime.ingest_engine, "before_cursor_execute", seen)
    return len(reads), result


def test_a_flood_of_bad_signatures_reads_the_endpoint_a_few_times_not_once_each(client, runtime):
    import time

    from hooklatch.endpoints.service import RECHECK_BURST, RECHECKS_PER_SECOND

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert post_stripe(client, endpoint, "evt_f_0", SECRET).status_code == 200
    started = time.monotonic()
    reads, answers = endpoint_reads(
        runtime,
        lambda: [post_stripe(client, endpoint, f"evt_f_{n}", "whsec_forged") for n in range(200)],
    )
    elapsed = time.monotonic() - started
    assert {(a.status_code, a.json["error"]) for a in answers} == {(401, "bad_signature")}
    assert reads <= RECHECK_BURST + RECHECKS_PER_SECOND * elapsed + 1, (reads, elapsed)


def test_a_secret_added_during_a_flood_verifies_within_a_recheck(client, runtime):
    import time

    from hooklatch.endpoints.service import RECHECKS_PER_SECOND, add_secret, get_endpoint

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    for n in range(50):
        post_stripe(client, endpoint, f"evt_g_{n}", "whsec_forged")
    with runtime.session_factory.begin() as session:
        add_secret(session, get_endpoint(session, endpoint), "whsec_added", box=runtime.box)
    deadline = time.monotonic() + 2 / RECHECKS_PER_SECOND
    while (answer := post_stripe(client, endpoint, "evt_g_new", "whsec_added")).status_code != 200:
        assert answer.status_code == 401
        assert time.monotonic() < deadline, "the new secret was not seen"
        time.sleep(0.02)
    assert count(runtime, "SELECT count(*) FROM events WHERE external_id = 'evt_g_new'") == 1
