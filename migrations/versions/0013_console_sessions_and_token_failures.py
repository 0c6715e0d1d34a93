"""console sign-ins held on the server (sign-out ends them), and failed admin-token
attempts per client address with their lockouts

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("token_sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("signed_in_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("token_sha256", name=op.f("pk_console_sessions")),
    )
    op.create_index(op.f("ix_console_sessions_expires_at"), "console_sessions", ["expires_at"])
    op.create_table(
        "token_failures",
        sa.Column("address", sa.String(length=64), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("address", name=op.f("pk_token_failures")),
    )
    op.create_index(op.f("ix_token_failures_expires_at"), "token_failures", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_token_failures_expires_at"), table_name="token_failures")
    op.drop_table("token_failures")
    op.drop_index(op.f("ix_console_sessions_expires_at"), table_name="console_sessions")
    op.drop_table("console_sessions")
