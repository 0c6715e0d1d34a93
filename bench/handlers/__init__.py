"""Handlers the benchmarks run: HOOKLATCH_HANDLERS=bench.handlers.noop or bench.handlers.write."""

from sqlalchemy import BigInteger, Column, Float, MetaData, Table

metadata = MetaData()

# One row per handled event: when its handler started (Unix time, this machine's clock).
effects = Table(
    "bench_effects",
    metadata,
    Column("event_id", BigInteger, primary_key=True),
    Column("started_at", Float, nullable=False),
)
