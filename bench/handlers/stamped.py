"""A handler that records each run of itself and its start (the reconcile scenario):
BENCH_HANDLER_SECONDS asleep (default 0), then one row through ctx.session with the event
and its start. No unique key: a second run of one event shows as a second row; a failed
run's row rolls back with its savepoint."""

import os

from bench.handlers import pause, stamped_runs
from hooklatch import Context, EventView, on


@on("stripe", "*")
def stamp(event: EventView, ctx: Context) -> None:
    started = pause(0)
    ctx.session.execute(
        stamped_runs.insert().values(
            event_id=event.id, external_id=event.external_id, pid=os.getpid(), started_at=started
        )
    )
