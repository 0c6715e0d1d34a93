"""The embedded default's store (SQLite) drops credential headers, flags a repeated body
and re-arms a dead event only within the retry window, as PostgreSQL's statement does."""

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.database import count, load_event, sqlite_settings
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.gitlab import push_body
from tests.support.signing import github_headers

FIRST_SEEN = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def settings(settings, tmp_path):
    """The embedded default: SQLite under the instance folder, no Redis."""
    sqlite = sqlite_settings(settings, tmp_path / "db")
    return sqlite


@pytest.fixture
def embedded(client_at):
    """Makes a test client, and its runtime, on one SQLite database at ``now``."""
    return client_at


def test_a_gitlab_token_is_not_stored_on_sqlite(embedded):
    client, runtime = embedded(FIRST_SEEN)
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["tok3n"])
    headers = {"X-Gitlab-Token": "tok3n", "X-Gitlab-Event": "Push Hook", "Idempotency-Key": "k"}
    response = post_json(client, endpoint, push_body(), headers)
    assert response.status_code == 200, response.json
    stored = load_event(runtime, response.json["events"][0]["id"]).headers
    assert "x-gitlab-token" not in stored
    assert stored["x-gitlab-event"] == "Push Hook"


def test_a_repeated_body_is_flagged_and_a_late_copy_does_not_rearm_on_sqlite(embedded):
    client, runtime = embedded(FIRST_SEEN)
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    body = json.dumps({"action": "opened", "issue": {"number": 5}}).encode()

    def post(delivery, kind="issues", client=client):
        headers = github_headers(body, "gh-secret", event=kind, delivery=delivery)
        answer = client.post(f"/hooks/{endpoint}", data=body, headers=headers).json
        return answer["status"], answer["events"][0]

    status, first = post("d-1")
    status, second = post("d-2", kind="pull_request")
    assert status == "accepted"
    assert load_event(runtime, second["id"]).repeats_event_id == first["id"]

    with runtime.engine.begin() as c:
        c.exec_driver_sql("UPDATE events SET status = 'dead'")
        c.exec_driver_sql("DELETE FROM outbox")
    late, _ = embedded(FIRST_SEEN + timedelta(days=3, minutes=1))
    assert post("d-1", client=late) == ("duplicate", {**first, "status": "duplicate"})
    assert load_event(runtime, first["id"]).status == "dead"
    soon, _ = embedded(FIRST_SEEN + timedelta(days=1))
    status, again = post("d-1", client=soon)
    assert again["rearmed"] is True
    assert load_event(runtime, first["id"]).status == "pending"
    assert count(runtime, "SELECT count(*) FROM outbox") == 1


def test_retention_prunes_and_deletes_on_sqlite(embedded):
    from hooklatch.operations.retention import Retention

    client, runtime = embedded(FIRST_SEEN)
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])

    def post(delivery, client=client):
        body = json.dumps({"action": "opened", "issue": {"number": delivery}}).encode()
        headers = github_headers(body, "gh-secret", event="issues", delivery=f"d-{delivery}")
        return client.post(f"/hooks/{endpoint}", data=body, headers=headers).json

    kept, pruned = (post(n)["events"][0]["id"] for n in (1, 2))
    with runtime.engine.begin() as c:
        c.exec_driver_sql("UPDATE events SET status = 'processed' WHERE id = ?", (pruned,))
        c.exec_driver_sql("DELETE FROM outbox")

    def cleanup(now):
        return Retention(replace(runtime, clock=lambda: now)).once()

    assert cleanup(FIRST_SEEN + timedelta(days=8)).pruned == 1
    # SQL, not the ORM: a JSON 'null' in headers would load as None too.
    gone = "SELECT count(*) FROM events WHERE id = :i AND body IS NULL AND headers IS NULL"
    assert count(runtime, gone, i=pruned) == 1
    assert load_event(runtime, kept).body is not None  # still pending
    assert post(2)["status"] == "duplicate"
    with runtime.engine.begin() as c:
        c.exec_driver_sql("UPDATE events SET status = 'dead'")
    assert cleanup(FIRST_SEEN + timedelta(days=31)).deleted == 2
    assert count(runtime, "SELECT count(*) FROM events") == 0


def test_cleanup_takes_prunable_payloads_from_their_index_on_sqlite(embedded):
    """Without statistics SQLite read every finished event through the status index and
    sorted them, in the write transaction ingest waits for; a pass analyzes the table."""
    from sqlalchemy import event, select

    from hooklatch.events.models import Event
    from hooklatch.operations.retention import Retention, _prunable

    client, runtime = embedded(FIRST_SEEN)
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    for n in range(200):
        body = json.dumps({"action": "opened", "issue": {"number": n}}).encode()
        headers = github_headers(body, "gh-secret", event="issues", delivery=f"d-{n}")
        assert client.post(f"/hooks/{endpoint}", data=body, headers=headers).status_code == 200
    with runtime.engine.begin() as c:
        c.exec_driver_sql("UPDATE events SET status = 'processed' WHERE id % 10 != 0")
        c.exec_driver_sql("DELETE FROM outbox")
    Retention(replace(runtime, clock=lambda: FIRST_SEEN + timedelta(days=1))).once()

    plans: list[str] = []
    claim = (
        select(Event.id)
        .where(_prunable(FIRST_SEEN + timedelta(days=8)))
        .order_by(Event.received_at)
        .limit(100)
    )

    def explain(conn, cursor, statement, parameters, context, executemany):
        cursor.execute("EXPLAIN QUERY PLAN " + statement, parameters)
        plans.extend(str(row[-1]) for row in cursor.fetchall())

    event.listen(runtime.engine, "before_cursor_execute", explain)
    try:
        with runtime.engine.connect() as c:
            c.execute(claim).all()
    finally:
        event.remove(runtime.engine, "before_cursor_execute", explain)
    assert any("ix_events_prunable" in line for line in plans), plans
    assert not any("TEMP B-TREE" in line for line in plans), plans


def test_the_console_counts_deliveries_on_sqlite(embedded):
    from hooklatch.events import activity

    client, runtime = embedded(FIRST_SEEN)
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    body = json.dumps({"action": "opened", "issue": {"number": 1}}).encode()
    for delivery in ("d-1", "d-1", "d-2"):  # the second is a duplicate
        headers = github_headers(body, "gh-secret", event="issues", delivery=delivery)
        assert client.post(f"/hooks/{endpoint}", data=body, headers=headers).status_code == 200
    runtime.activity.flush()
    runtime.activity.flush()  # nothing held: nothing written twice
    with runtime.session_factory() as session:
        seen = activity.overview(session, now=FIRST_SEEN)
    assert seen["counts"][endpoint] == {"accepted": 2, "duplicate": 1}
