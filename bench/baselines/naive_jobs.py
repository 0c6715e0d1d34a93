"""The naive receiver's job: one RQ job per event, run by a stock `rq worker`."""

from __future__ import annotations

import os
from typing import Any

import psycopg2

_connection: Any = None


def _db() -> Any:
    global _connection
    if _connection is None or _connection.closed:
        _connection = psycopg2.connect(os.environ["DATABASE_URL"])
    return _connection


def process_event(event_id: int) -> None:
    db = _db()
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT body FROM naive_events WHERE id = %s AND processed_at IS NULL FOR UPDATE",
            (event_id,),
        )
        if cursor.fetchone() is None:
            db.rollback()
            return
        # The handler: nothing (the same noop as hooklatch's drain benchmark).
        cursor.execute(
            "UPDATE naive_events SET processed_at = clock_timestamp() WHERE id = %s", (event_id,)
        )
    db.commit()
