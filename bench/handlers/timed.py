"""A handler of fixed, known cost (the ordering scenario): it sleeps BENCH_HANDLER_SECONDS
(default 5 ms), then writes one row through ctx.session with its customer, its process and
its own start and end. The end is the database's clock as the insert runs, the handler's
last act; both clocks are this machine's. No unique key: a second run of one event shows
as a second row instead of failing, and overlapping runs of one key show in their times."""

import os
import time

from sqlalchemy import BigInteger, Column, Float, Integer, String, Table, func

from bench.handlers import metadata
from hooklatch import Context, EventView, on

runs = Table(
    "bench_timed_runs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("event_id", BigInteger, nullable=False),
    Column("customer", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float, nullable=False),
)


@on("stripe", "*")
def sleep_then_write(event: EventView, ctx: Context) -> None:
    started = time.time()
    time.sleep(float(os.environ.get("BENCH_HANDLER_SECONDS") or 0.005))
    ctx.session.execute(
        runs.insert().values(
            event_id=event.id,
            customer=event.payload["data"]["object"]["customer"],
            pid=os.getpid(),
            started_at=started,
            finished_at=func.extract("epoch", func.clock_timestamp()),
        )
    )
