"""Destinations and forwards as rows, for the tests of what status, /metrics and the
console show of them.

Destinations are seeded directly, with their secret settings encrypted as the domain
stores them (``runtime.box``) and what every face shows of them (``shown``): the subject
of these tests is what is shown, not how a kind checks its settings (the kinds' own tests
and tests/integration/forwarding show that). Events are stored processed, as a
forward's event is.
"""

from __future__ import annotations

import json
import secrets as random
from datetime import datetime, timedelta

from sqlalchemy import text

from hooklatch.forwarding.models import Destination, Forward
from hooklatch.runtime import Runtime

# A secret setting no page or line of output may hold.
PASSWORD = "hunter2-never-shown"
URL = f"https://hooklatch:{PASSWORD}@receiver.example.test/events"
SHOWN = "https://hooklatch:***@receiver.example.test/events"

EVENT = (
    "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts, body,"
    " headers, body_sha256, received_at, mismatched_duplicates)"
    " VALUES (:e, 'stripe', :x, :t, 'processed', 1, '\\x7b7d', '{}', 'x', :at, 0)"
    " RETURNING id"
)


def seed_destination(
    runtime: Runtime,
    name: str,
    *,
    kind: str = "http",
    paused: bool = False,
    rate_limit: float | None = None,
    provider: str | None = None,
    types: tuple[str, ...] = (),
    delivered: int = 0,
    failed: int = 0,
    last_error: str | None = None,
) -> str:
    """A destination row whose secret settings hold ``URL``; returns its id."""
    plaintext = json.dumps({"url": URL})
    now = runtime.clock()
    with runtime.session_factory.begin() as session:
        row = Destination(
            id=f"dst_{random.token_hex(10)}",
            name=name,
            kind=kind,
            settings={"method": "POST"},
            ciphertext=runtime.box.encrypt(plaintext),
            fingerprint=runtime.box.fingerprint(plaintext),
            shown=SHOWN,
            provider=provider,
            types=list(types),
            rate_limit=rate_limit,
            paused=paused,
            created_at=now,
            updated_at=now,
            delivered_total=delivered,
            failed_total=failed,
            last_failed_at=now if last_error else None,
            last_error=last_error,
        )
        session.add(row)
        return row.id


def seed_event(
    runtime: Runtime, endpoint: str, external_id: str, event_type: str = "invoice.paid"
) -> int:
    with runtime.engine.begin() as connection:
        values = {"e": endpoint, "x": external_id, "t": event_type, "at": runtime.clock()}
        return int(connection.execute(text(EVENT), values).scalar_one())


def seed_forward(
    runtime: Runtime,
    destination: str,
    event: int,
    *,
    status: str,
    age: timedelta = timedelta(0),
    attempts: int = 0,
    last_error: str | None = None,
) -> int:
    """A forward of ``event`` to ``destination``, written ``age`` ago."""
    created: datetime = runtime.clock() - age
    with runtime.session_factory.begin() as session:
        row = Forward(
            destination_id=destination,
            event_id=event,
            status=status,
            attempts=attempts,
            last_error=last_error,
            created_at=created,
        )
        session.add(row)
        session.flush()
        return row.id


def seed_forwards(
    runtime: Runtime,
    destination: str,
    endpoint: str,
    statuses: dict[str, int],
    *,
    age: timedelta = timedelta(0),
    prefix: str = "evt",
) -> list[int]:
    """``statuses[status]`` forwards of that status, each of an event of its own."""
    made = []
    for status, number in statuses.items():
        for n in range(number):
            event = seed_event(runtime, endpoint, f"{prefix}_{destination}_{status}_{n}")
            made.append(seed_forward(runtime, destination, event, status=status, age=age))
    return made
