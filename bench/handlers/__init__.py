"""Handlers the benchmarks run: HOOKLATCH_HANDLERS=bench.handlers.noop, bench.handlers.write
or bench.handlers.record (the chaos scenario)."""

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, String, Table

metadata = MetaData()

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
