"""A table standing for a user's business data, written by test handlers through ctx.session."""

from sqlalchemy import Boolean, Column, Integer, MetaData, String, Table

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
