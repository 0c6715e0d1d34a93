"""A handler that records each run of itself through ctx.session (the chaos scenario), and
then takes BENCH_HANDLER_SECONDS (default 0), so that kills often land inside a job."""

import os

from bench.handlers import pause, runs
from hooklatch import Context, EventView, on


@on("stripe", "*")
def record_run(event: EventView, ctx: Context) -> None:
    ctx.session.execute(runs.insert().values(external_id=event.external_id, pid=os.getpid()))
    pause(0)
