"""the provider's side of an endpoint: its API credential, its webhook at the provider,
reconcile cursors and runs; where each event came from and how it was verified

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

UTC_TIME = sa.DateTime(timezone=True)


def _endpoint_key(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["endpoint_id"],
        ["endpoints.id"],
        name=op.f(f"fk_{table}_endpoint_id_endpoints"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    # Server defaults: adding the columns rewrites nothing (PostgreSQL 11 and later keep
    # a constant default in the catalogue), and every stored event came by webhook.
    with op.batch_alter_table("events") as batch:
        batch.add_column(
            sa.Column("origin", sa.String(length=8), server_default="webhook", nullable=False)
        )
        batch.add_column(
            sa.Column(
                "verified_by", sa.String(length=16), server_default="signature", nullable=False
            )
        )
    op.create_table(
        "endpoint_credentials",
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("ciphertext", sa.LargeBinary(), nullable=False),
        sa.Column("fields", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=16), nullable=False),
        sa.Column("created_at", UTC_TIME, nullable=False),
        _endpoint_key("endpoint_credentials"),
        sa.PrimaryKeyConstraint("endpoint_id", name=op.f("pk_endpoint_credentials")),
    )
    op.create_table(
        "provider_hooks",
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("api_url", sa.String(length=500), nullable=True),
        sa.Column("scope", sa.String(length=255), nullable=True),
        sa.Column("hook_id", sa.String(length=255), nullable=True),
        sa.Column("event_types", sa.JSON(), nullable=True),
        sa.Column("registered_at", UTC_TIME, nullable=True),
        sa.Column("seen_url", sa.String(length=2000), nullable=True),
        sa.Column("seen_event_types", sa.JSON(), nullable=True),
        sa.Column("seen_enabled", sa.Boolean(), nullable=True),
        sa.Column("drift", sa.String(length=200), nullable=True),
        sa.Column("checked_at", UTC_TIME, nullable=True),
        sa.Column("check_error", sa.Text(), nullable=True),
        _endpoint_key("provider_hooks"),
        sa.PrimaryKeyConstraint("endpoint_id", name=op.f("pk_provider_hooks")),
    )
    op.create_table(
        "reconcile_states",
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("cursor", UTC_TIME, nullable=True),
        sa.Column("lease_owner", sa.String(length=100), nullable=True),
        sa.Column("lease_until", UTC_TIME, nullable=True),
        sa.Column("next_run_at", UTC_TIME, nullable=True),
        sa.Column("requested", sa.JSON(), nullable=True),
        sa.Column("last_success_at", UTC_TIME, nullable=True),
        sa.Column("resume", sa.JSON(), nullable=True),
        sa.Column("missing_total", sa.BigInteger(), nullable=False),
        sa.Column("present_total", sa.BigInteger(), nullable=False),
        sa.Column("fetched_total", sa.BigInteger(), nullable=False),
        sa.Column("redeliveries_total", sa.BigInteger(), nullable=False),
        sa.Column("requests_total", sa.BigInteger(), nullable=False),
        sa.Column("runs_total", sa.BigInteger(), nullable=False),
        sa.Column("errors_total", sa.JSON(), nullable=True),
        _endpoint_key("reconcile_states"),
        sa.PrimaryKeyConstraint("endpoint_id", name=op.f("pk_reconcile_states")),
    )
    big_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "reconcile_runs",
        sa.Column("id", big_id, autoincrement=True, nullable=False),
        sa.Column("endpoint_id", sa.String(length=40), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("requested_by", sa.String(length=200), nullable=False),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("everything", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stop_reason", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started_at", UTC_TIME, nullable=False),
        sa.Column("finished_at", UTC_TIME, nullable=True),
        sa.Column("since", UTC_TIME, nullable=True),
        sa.Column("cursor_before", UTC_TIME, nullable=True),
        sa.Column("cursor_after", UTC_TIME, nullable=True),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("pages", sa.Integer(), nullable=False),
        sa.Column("listed", sa.Integer(), nullable=False),
        sa.Column("missing", sa.Integer(), nullable=False),
        sa.Column("present", sa.Integer(), nullable=False),
        sa.Column("fetched", sa.Integer(), nullable=False),
        sa.Column("redeliveries", sa.Integer(), nullable=False),
        sa.Column("api_errors", sa.Integer(), nullable=False),
        sa.Column("sample", sa.JSON(), nullable=True),
        _endpoint_key("reconcile_runs"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reconcile_runs")),
    )
    # An endpoint's newest runs (the faces, and the metrics' last run of each) at once.
    op.create_index("ix_reconcile_runs_endpoint_id_id", "reconcile_runs", ["endpoint_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_reconcile_runs_endpoint_id_id", table_name="reconcile_runs")
    op.drop_table("reconcile_runs")
    op.drop_table("reconcile_states")
    op.drop_table("provider_hooks")
    op.drop_table("endpoint_credentials")
    with op.batch_alter_table("events") as batch:
        batch.drop_column("verified_by")
        batch.drop_column("origin")
