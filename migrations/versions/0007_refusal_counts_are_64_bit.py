"""refusal counts are 64-bit

A flood of 1,000 refused deliveries a second passes 2**31 in 25 days; past it, every
write of an endpoint's count failed and the counts stopped. SQLite's INTEGER is 64-bit
already: its column only changes its declared type.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("refusals") as batch:
        batch.alter_column("count", type_=sa.BigInteger(), existing_type=sa.Integer())


def downgrade() -> None:
    with op.batch_alter_table("refusals") as batch:
        batch.alter_column("count", type_=sa.Integer(), existing_type=sa.BigInteger())
