"""endpoint options; refusal counts by endpoint and reason; lost dispatches per outbox row

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 17:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from hooklatch.migrations.ddl import foreign_key

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(sa.Column("options", sa.JSON(), nullable=True))
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(
            sa.Column("lost_dispatches", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "refusals",
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        foreign_key("refusals", "endpoint_id", "endpoints", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("endpoint_id", "reason", name=op.f("pk_refusals")),
    )


def downgrade() -> None:
    with op.batch_alter_table("outbox", recreate="never") as batch:
        batch.drop_column("lost_dispatches")
    op.drop_table("refusals")
    with op.batch_alter_table("endpoints", recreate="never") as batch:
        batch.drop_column("options")
