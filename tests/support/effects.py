"""A table standing for a user's business data, written by test handlers through ctx.session."""

from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, select

metadata = MetaData()

effects = Table(
    "test_effects",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("external_id", String(255), nullable=False),
    Column("idempotency_key", String(300), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("is_replay", Boolean, nullable=False),
)

# One row per committed run of the ordering tests' handler: when it ran, in which process.
runs = Table(
    "test_runs",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Integer, nullable=False),
    Column("key", String(255), nullable=False),
    Column("started", Float, nullable=False),
    Column("finished", Float, nullable=False),
    Column("pid", Integer, nullable=False),
    Column("is_replay", Boolean, nullable=False),
)


def effect_rows(runtime, external_id: str) -> list:
    """The effects test handlers wrote for one provider event id."""
    with runtime.engine.connect() as connection:
        query = select(effects).where(effects.c.external_id == external_id)
        return list(connection.execute(query).all())
