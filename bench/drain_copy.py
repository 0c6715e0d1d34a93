"""Drain every pending event of the database in DATABASE_URL in this one process, as a
worker's jobs run them (``process_events`` over jobs of 1,000 ids), and print the events
and the seconds as JSON: bench.copies runs it with each side's interpreter, so that the
hooklatch it imports is that side's. It imports nothing else of the harness, whose
modules register handlers of their own."""

from __future__ import annotations

import json
import time

from sqlalchemy import text

from hooklatch.assembly import build_runtime
from hooklatch.settings import Settings
from hooklatch.workers.worker import jobs

JOB_SIZE = 1000


def main() -> None:
    runtime = build_runtime(Settings.from_env())
    jobs.install(runtime)
    with runtime.engine.connect() as connection:
        query = text("SELECT id FROM events WHERE status = 'pending' ORDER BY id")
        ids = list(connection.scalars(query))
    started = time.perf_counter()
    for start in range(0, len(ids), JOB_SIZE):
        jobs.process_events(runtime, ids[start : start + JOB_SIZE])
    seconds = time.perf_counter() - started
    runtime.engine.dispose()
    print(json.dumps({"events": len(ids), "seconds": seconds}))


if __name__ == "__main__":
    main()
