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


# One row per committed run of the handler that records what it was shown: the flags a
# delivery of an unsigned id or type may carry, and the body it ran with.
seen = Table(
    "test_seen",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("event_id", Integer, nullable=False),
    Column("external_id", String(255), nullable=False),
    Column("idempotency_key", String(400), nullable=False),
    Column("body", String(4000), nullable=False),
    Column("repeats_event_id", Integer),
    Column("conflicts_with_event_id", Integer),
)


def effect_rows(runtime, external_id: str) -> list:
    """The effects test handlers wrote for one provider event id."""
    with runtime.engine.connect() as connection:
        query = select(effects).where(effects.c.external_id == external_id)
        return list(connection.execute(query).all())
