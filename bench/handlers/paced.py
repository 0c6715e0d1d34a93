"""A handler of fixed cost that records when it started (the replay scenario): it fails at
once while the file BENCH_BROKEN names exists (a downstream outage: with
HOOKLATCH_MAX_ATTEMPTS=1 each event it fails is dead), and otherwise sleeps
BENCH_HANDLER_SECONDS (default 30 ms, a call to a downstream API), then writes one row
through ctx.session: the event, its process, whether it is a replay, and its start. A
failed run's row is rolled back with its savepoint; a second run shows as a second row."""

import os
from pathlib import Path

from bench.handlers import paced_runs, pause
from hooklatch import Context, EventView, on


@on("stripe", "*")
def sleep_unless_broken(event: EventView, ctx: Context) -> None:
    if Path(os.environ["BENCH_BROKEN"]).exists():
        raise RuntimeError("the downstream API is down (the benchmark's marker says so)")
    started = pause(0.03)
    ctx.session.execute(
        paced_runs.insert().values(
            event_id=event.id,
            external_id=event.external_id,
            is_replay=ctx.is_replay,
            pid=os.getpid(),
            started_at=started,
        )
    )
