"""A handler that records each run of itself through ctx.session (the chaos scenario), and
then takes BENCH_HANDLER_SECONDS (default 0), so that kills often land inside a job."""

import os
import time

from bench.handlers import runs
from hooklatch import Context, EventView, on


@on("stripe", "*")
def record_run(event: EventView, ctx: Context) -> None:
    ctx.session.execute(runs.insert().values(external_id=event.external_id, pid=os.getpid()))
    time.sleep(float(os.environ.get("BENCH_HANDLER_SECONDS") or 0))
