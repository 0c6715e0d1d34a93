"""A worker's claims read no body: each event's body and headers are read as it runs, a
group within HOOKLATCH_WORKER_BODY_BYTES at a time, and every handler gets its own."""

from __future__ import annotations

import json
import re
import uuid
from contextlib import contextmanager

from sqlalchemy import event, text

from hooklatch.workers.worker import processing
from hooklatch.workers.worker.jobs import process_events
from tests.support.pipeline import configure_ordering, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
PAYLOAD_READ = "SELECT events.id, events.body, events.headers \nFROM events"


BEGIN = "BEGIN"


@contextmanager
def statements(runtime):
    """Every statement the runtime's engine runs meanwhile, with its parameters, and a
    BEGIN where each transaction starts."""
    seen: list[tuple[str, object]] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, parameters))

    def begin(conn):
        seen.append((BEGIN, None))

    event.listen(runtime.engine, "before_cursor_execute", record)
    event.listen(runtime.engine, "begin", begin)
    try:
        yield seen
    finally:
        event.remove(runtime.engine, "before_cursor_execute", record)
        event.remove(runtime.engine, "begin", begin)


def reads_a_body(statement: str) -> bool:
    """The statement selects a body or headers, not only their sizes."""
    rest = statement.replace("length(events.body)", "").replace("CAST(events.headers AS", "")
    return re.search(r"events\.(body|headers)\b", rest) is not None


def payload_reads(seen) -> list[list[int]]:
    """The ids each payload read asked for, in order."""
    return [
        sorted(v for v in params.values() if isinstance(v, int))
        for statement, params in seen
        if statement.startswith(PAYLOAD_READ)
    ]


def reads_per_transaction(seen) -> list[int]:
    """How many payload reads each transaction that read any made."""
    counts: list[int] = []
    for statement, _ in seen:
        if statement == BEGIN:
            counts.append(0)
        elif statement.startswith(PAYLOAD_READ):
            counts[-1] += 1
    return [n for n in counts if n]


def send(client, endpoint, *, customer="cus_1", padding=0) -> int:
    body = stripe_event(
        f"evt_{uuid.uuid4().hex[:20]}",
        event_type="invoice.paid",
        customer=customer,
        padding="p" * padding,
    )
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    return int(response.json["events"][0]["id"])


def recorder(router):
    """A handler that records what each event brought it."""
    seen: dict[int, tuple[str, int, bool]] = {}

    @router.on("stripe", "invoice.paid")
    def record(view, ctx):
        seen[view.id] = (
            view.payload["id"],
            len(view.body),
            "stripe-signature" in view.headers,
        )
        assert json.loads(view.body)["id"] == view.external_id

    return seen


def stored(runtime, ids) -> dict[int, tuple[str, int, bool]]:
    with runtime.engine.connect() as connection:
        rows = connection.execute(
            text("SELECT id, external_id, length(body) FROM events WHERE id = ANY(:ids)"),
            {"ids": ids},
        )
        return {row.id: (row.external_id, row[2], True) for row in rows}


def sizes(runtime, ids) -> dict[int, int]:
    with runtime.engine.connect() as connection:
        rows = connection.execute(
            text(
                "SELECT id, length(body) + length(headers::text) FROM events WHERE id = ANY(:ids)"
            ),
            {"ids": ids},
        )
        return {row.id: row[1] for row in rows}


def processed_reading_bodies_apart(runtime, ids, seen):
    """The events processed, their handlers shown the stored bodies, which were read apart
    from the claims: one read per transaction (a chunk cut short for time goes on in
    another one), and every event's body in one of them."""
    with statements(runtime) as executed:
        counts = process_events(runtime, ids)

    assert counts["processed"] == len(ids)
    assert seen == stored(runtime, ids)
    assert [s for s, _ in executed if reads_a_body(s) and not s.startswith(PAYLOAD_READ)] == []
    assert set(reads_per_transaction(executed)) == {1}
    # (An event left for the next transaction may have been read by this one too.)
    assert {i for read in payload_reads(executed) for i in read} == set(ids)


def test_a_chunk_of_small_events_reads_their_bodies_in_one_statement_not_in_its_claim(
    client, runtime, router
):
    seen = recorder(router)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [send(client, endpoint) for _ in range(50)]

    processed_reading_bodies_apart(runtime, ids, seen)


def test_events_of_many_keys_read_their_bodies_together_not_one_statement_each(
    client, runtime, router
):
    seen = recorder(router)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo")
    ids = [send(client, endpoint, customer=f"cus_{n}") for n in range(40)]

    processed_reading_bodies_apart(runtime, ids, seen)


def no_time_limit(monkeypatch) -> None:
    """One transaction runs the whole job: cut short by its time on a busy machine, the
    next one would start over with a fresh read-ahead and change the groups read."""
    monkeypatch.setattr(processing, "TRANSACTION_SECONDS", 60.0)


def test_bodies_are_read_in_groups_within_the_budget_and_a_larger_one_alone(
    app_with, router, monkeypatch
):
    no_time_limit(monkeypatch)
    app = app_with(worker_body_bytes=250_000)
    client, runtime = app.test_client(), app.extensions["hooklatch"]
    seen = recorder(router)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    small = [send(client, endpoint, padding=100_000) for _ in range(5)]
    large = send(client, endpoint, padding=400_000)
    after = [send(client, endpoint, padding=100_000) for _ in range(2)]
    ids = [*small, large, *after]

    with statements(runtime) as executed:
        counts = process_events(runtime, ids)

    assert counts["processed"] == len(ids)
    assert seen == stored(runtime, ids)
    reads = payload_reads(executed)
    assert reads == [small[:2], small[2:4], [small[4]], [large], after]
    size = sizes(runtime, ids)
    assert all(sum(size[i] for i in group) <= 250_000 for group in reads if group != [large])


def test_a_transaction_reads_ahead_no_more_than_it_has_run(client, runtime, router, monkeypatch):
    """Within the budget (32 MiB), the first read takes 1 MiB and each later one at most
    what has run: a transaction cut short for time has read little it did not run."""
    no_time_limit(monkeypatch)
    seen = recorder(router)
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    ids = [send(client, endpoint, padding=400_000) for _ in range(8)]

    with statements(runtime) as executed:
        counts = process_events(runtime, ids)

    assert counts["processed"] == len(ids)
    assert seen == stored(runtime, ids)
    assert payload_reads(executed) == [ids[:2], ids[2:4], ids[4:8]]
