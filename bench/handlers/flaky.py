"""A handler that records each run of itself through ctx.session, and fails while the
file BENCH_BROKEN names exists (a downstream outage): the events it fails are dead with
one attempt (HOOKLATCH_MAX_ATTEMPTS=1), and a replay after the "fix" runs them again. A
failed run's row is rolled back with its savepoint: each successful run is one row."""

import os
from pathlib import Path

from bench.handlers import runs
from hooklatch import Context, EventView, on


@on("stripe", "*")
def record_unless_broken(event: EventView, ctx: Context) -> None:
    ctx.session.execute(runs.insert().values(external_id=event.external_id, pid=os.getpid()))
    if Path(os.environ["BENCH_BROKEN"]).exists():
        raise RuntimeError("the downstream API is down (the benchmark's marker says so)")
