"""The endpoint_credentials, provider_hooks, reconcile_states and reconcile_runs tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime, utcnow
from hooklatch.events.models import BigId


class EndpointCredential(Base):
    """An endpoint's credential for its provider's API (a Stripe restricted key, a GitHub
    token or App): its fields as one encrypted JSON object, like the endpoint's secrets.
    Setting it again replaces it (rotation)."""

    __tablename__ = "endpoint_credentials"

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    # The names of its fields (never their values) and a keyed fingerprint of the whole,
    # to tell one credential from the next without showing it.
    fields: Mapped[str] = mapped_column(String(200))
    fingerprint: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ProviderHook(Base):
    """The webhook at the provider that delivers to an endpoint: where it lives, what
    hooklatch asked for, and what the provider held when it last looked."""

    __tablename__ = "provider_hooks"

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    api_url: Mapped[str | None] = mapped_column(String(500))
    scope: Mapped[str | None] = mapped_column(String(255))
    hook_id: Mapped[str | None] = mapped_column(String(255))
    # The event types asked for at registration (None: linked, not registered here).
    event_types: Mapped[list[str] | None] = mapped_column(JSON)
    registered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # What the provider held at ``checked_at``: its URL, event types and whether it
    # delivers; ``drift`` names each way it differs from what hooklatch expects
    # (disabled, url_changed, event_types_changed, deleted), comma-separated.
    seen_url: Mapped[str | None] = mapped_column(String(2000))
    seen_event_types: Mapped[list[str] | None] = mapped_column(JSON)
    seen_enabled: Mapped[bool | None] = mapped_column(Boolean)
    drift: Mapped[str | None] = mapped_column(String(200))
    checked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Why the last look failed (the API's reason and words), else None.
    check_error: Mapped[str | None] = mapped_column(Text)


class ReconcileState(Base):
    """An endpoint's reconcile: its cursor, the lease that lets one run at a time across
    every relay and face, a run asked for by hand, and counts since it began."""

    __tablename__ = "reconcile_states"

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    # Everything the provider had by this time is stored (pull) or was asked for again
    # (push); the next run starts an overlap before it. Never ahead of what was stored.
    cursor: Mapped[datetime | None] = mapped_column(UTCDateTime)
    lease_owner: Mapped[str | None] = mapped_column(String(100))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A run asked for through the admin API or the console, which a relay carries out:
    # {"dry_run", "since", "everything", "requested_by", "trigger"}.
    requested: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    last_success_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # A listing a run left cut short, which the next run goes on with: {"token": the
    # provider's next page, "since", "began": when it began, "everything"}.
    resume: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Totals of the runs that were not dry runs, for the metrics (counters).
    missing_total: Mapped[int] = mapped_column(BigInteger, default=0)
    present_total: Mapped[int] = mapped_column(BigInteger, default=0)
    fetched_total: Mapped[int] = mapped_column(BigInteger, default=0)
    redeliveries_total: Mapped[int] = mapped_column(BigInteger, default=0)
    requests_total: Mapped[int] = mapped_column(BigInteger, default=0)
    runs_total: Mapped[int] = mapped_column(BigInteger, default=0)
    # API errors by reason: {"rate_limited": 3, ...}.
    errors_total: Mapped[dict[str, int] | None] = mapped_column(JSON)


class ReconcileRun(Base):
    """One reconcile of one endpoint: what it asked the provider, found and did."""

    __tablename__ = "reconcile_runs"
    __table_args__ = (
        # An endpoint's runs newest first, found at once: its latest runs (the faces) and
        # its last one that ended (the metrics, at every read of the database gauges).
        Index("ix_reconcile_runs_endpoint_id_id", "endpoint_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"))
    trigger: Mapped[str] = mapped_column(String(16))  # schedule | cli | api | console
    requested_by: Mapped[str] = mapped_column(String(200))
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    # pull: every event since, or only those whose delivery has not succeeded.
    everything: Mapped[bool] = mapped_column(Boolean, default=False)
    # running, then finished, cut_short (stop_reason says why; the next run resumes),
    # failed (error), or interrupted (its process died; found by the next run).
    status: Mapped[str] = mapped_column(String(16), default="running")
    stop_reason: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The earliest time asked of the provider, and the cursor before and after.
    since: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cursor_before: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cursor_after: Mapped[datetime | None] = mapped_column(UTCDateTime)
    requests: Mapped[int] = mapped_column(Integer, default=0)
    pages: Mapped[int] = mapped_column(Integer, default=0)
    listed: Mapped[int] = mapped_column(Integer, default=0)
    missing: Mapped[int] = mapped_column(Integer, default=0)
    present: Mapped[int] = mapped_column(Integer, default=0)
    fetched: Mapped[int] = mapped_column(Integer, default=0)
    redeliveries: Mapped[int] = mapped_column(Integer, default=0)
    api_errors: Mapped[int] = mapped_column(Integer, default=0)
    # What was (or, in a dry run, would be) fetched or redelivered: the first ids.
    sample: Mapped[list[str] | None] = mapped_column(JSON)
