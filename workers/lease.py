"""A running job holds a PostgreSQL advisory lock named after its job id.

The lock lives on the job's own connection, so it dies with the process that
ran the job: "is this job still running?" is answered by the database, at once,
without trusting a heartbeat.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from hooklatch.db import is_postgres


def lock_key(job_id: str) -> int:
    return int.from_bytes(
        hashlib.blake2b(job_id.encode(), digest_size=8).digest(), "big", signed=True
    )


@contextmanager
def job_lease(engine: Engine, job_id: str | None) -> Iterator[None]:
    if not job_id or not is_postgres(engine):
        yield
        return
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": lock_key(job_id)})
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": lock_key(job_id)})


def leases_held(engine: Engine, job_ids: list[str]) -> set[str]:
    """Which of these jobs is some live connection running right now (none without
    PostgreSQL, which alone has the locks)."""
    if not job_ids or not is_postgres(engine):
        return set()
    held = set()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        for job_id in job_ids:
            key = lock_key(job_id)
            got = connection.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar()
            if got:
                connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
            else:
                held.add(job_id)
    return held
