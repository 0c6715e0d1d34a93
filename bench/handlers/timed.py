"""A handler of fixed, known cost (the ordering scenario): it sleeps BENCH_HANDLER_SECONDS
(default 5 ms), then writes one row through ctx.session with its customer, its process and
its own start and end. The end is the database's clock as the insert runs, the handler's
last act; both clocks are this machine's. No unique key: a second run of one event shows
as a second row instead of failing, and overlapping runs of one key show in their times."""

import os

from sqlalchemy import func

from bench.handlers import pause, timed_runs
from hooklatch import Context, EventView, on


@on("stripe", "*")
def sleep_then_write(event: EventView, ctx: Context) -> None:
    started = pause(0.005)
    ctx.session.execute(
        timed_runs.insert().values(
            event_id=event.id,
            customer=event.payload["data"]["object"]["customer"],
            pid=os.getpid(),
            started_at=started,
            finished_at=func.extract("epoch", func.clock_timestamp()),
        )
    )
