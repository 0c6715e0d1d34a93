"""Handlers the benchmarks run (HOOKLATCH_HANDLERS=bench.handlers.noop, bench.handlers.write,
bench.handlers.record for the chaos scenario, bench.handlers.paced for the replay one,
bench.handlers.timed for the ordering one, bench.handlers.stamped for the reconcile one),
and the tables they write: every one is created with `metadata` as a benchmark's database
is prepared."""

import os
import time
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, Float, Integer, MetaData, String, Table

metadata = MetaData()


def pause(default_seconds: float) -> float:
    """A handler's fixed cost (a call to a downstream API): BENCH_HANDLER_SECONDS asleep, or
    ``default_seconds``. Returns when it began (Unix time, this machine's clock)."""
    started = time.time()
    seconds = float(os.environ.get("BENCH_HANDLER_SECONDS") or default_seconds)
    if seconds > 0:  # sleep(0) still yields the core, a cost of its own on a busy machine
        time.sleep(seconds)
    return started


def handler_runs(name: str, *columns: Column[Any]) -> Table:
    """One row per committed run of a handler, with no unique key (a second run of one event
    shows as a second row): the event, the process, its start (Unix time, this machine's
    clock), and ``columns``."""
    return Table(
        name,
        metadata,
        Column("id", BigInteger, primary_key=True, autoincrement=True),
        Column("event_id", BigInteger, nullable=False),
        Column("pid", Integer, nullable=False),
        Column("started_at", Float, nullable=False),
        *columns,
    )


# One row per handled event: when its handler started (Unix time, this machine's clock).
effects = Table(
    "bench_effects",
    metadata,
    Column("event_id", BigInteger, primary_key=True),
    Column("started_at", Float, nullable=False),
)

# One row per run of a handler, with no unique key: a second run of one event shows as a
# second row instead of failing.
runs = Table(
    "bench_handler_runs",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
)

# The replay scenario's handler (paced): whether a run was a replay's, and which event.
paced_runs = handler_runs(
    "bench_paced_runs",
    Column("external_id", String(255), nullable=False),
    Column("is_replay", Boolean, nullable=False),
)
# The ordering scenario's handler (timed): the event's customer, and the run's own end.
timed_runs = handler_runs(
    "bench_timed_runs",
    Column("customer", String(255), nullable=False),
    Column("finished_at", Float, nullable=False),
)
# The reconcile scenario's handler (stamped): which event, by its provider's id.
stamped_runs = handler_runs(
    "bench_stamped_runs", Column("external_id", String(255), nullable=False)
)
