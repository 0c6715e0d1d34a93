"""What each endpoint's reconcile says about ingest and about its provider, read for the
metrics: the totals kept in ``reconcile_states`` (runs that were not dry runs; API calls
and their errors of every run), the status of the last run that ended, and the drift of
its webhook at the provider.

Only endpoints with a credential are read: they are the ones a reconcile can run for,
which bounds the series to the endpoints an operator set up. Totals come from the
states, never from the runs, so deleting old runs never makes a counter go down.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select

from hooklatch.endpoints.models import Endpoint
from hooklatch.providers.remote import REASONS
from hooklatch.reconcile.hooks import DELETED, DISABLED, EVENT_TYPES_CHANGED, URL_CHANGED
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)
from hooklatch.reconcile.runs import CUT_SHORT, FAILED, FINISHED, INTERRUPTED, RUNNING

# The ways a run can end, and a webhook can drift: each endpoint reports all of them
# (1 for the one that holds, 0 for the others), so a series exists before it changes.
ENDED = (FINISHED, CUT_SHORT, FAILED, INTERRUPTED)
DRIFTS = (DISABLED, URL_CHANGED, EVENT_TYPES_CHANGED, DELETED)
# An API error whose reason is not one of the contract's (a plugin's own word) is
# counted under this one, so a plugin cannot add series without bound.
OTHER = "other"
TOTALS = ("missing", "present", "fetched", "redeliveries", "requests", "runs")


@dataclass(frozen=True)
class EndpointSignals:
    endpoint_id: str
    provider: str
    # The relays run it on their schedule (the endpoint is enabled).
    enabled: bool
    # Each of TOTALS; 0 before the first run.
    totals: dict[str, int]
    # API errors by reason: every one of REASONS, and OTHER once it happened.
    errors: dict[str, int]
    last_success_at: datetime | None
    # The status of the last run that ended, not a dry run; None before one has.
    last_status: str | None
    # The drift kinds the last look found; None without a webhook to look at.
    drift: frozenset[str] | None


def read_signals(connection: Connection) -> list[EndpointSignals]:
    """One query: each endpoint with a credential, its state and webhook (a row each at
    most), and the status of its last ended run (found by index, newest first)."""
    last_status = (
        select(ReconcileRun.status)
        .where(
            ReconcileRun.endpoint_id == EndpointCredential.endpoint_id,
            ReconcileRun.dry_run.is_(False),
            ReconcileRun.status != RUNNING,
        )
        .order_by(ReconcileRun.id.desc())
        .limit(1)
        .correlate(EndpointCredential)
        .scalar_subquery()
    )
    state = ReconcileState
    rows = connection.execute(
        select(
            EndpointCredential.endpoint_id,
            Endpoint.provider,
            Endpoint.enabled,
            *(getattr(state, f"{name}_total") for name in TOTALS),
            state.errors_total,
            state.last_success_at,
            ProviderHook.hook_id,
            ProviderHook.drift,
            last_status.label("last_status"),
        )
        .join(Endpoint, Endpoint.id == EndpointCredential.endpoint_id)
        .outerjoin(state, state.endpoint_id == EndpointCredential.endpoint_id)
        .outerjoin(ProviderHook, ProviderHook.endpoint_id == EndpointCredential.endpoint_id)
        .order_by(EndpointCredential.endpoint_id)
    ).all()
    return [
        EndpointSignals(
            endpoint_id=row.endpoint_id,
            provider=row.provider,
            enabled=bool(row.enabled),
            totals={name: int(getattr(row, f"{name}_total") or 0) for name in TOTALS},
            errors=_errors(row.errors_total),
            last_success_at=row.last_success_at,
            last_status=row.last_status if row.last_status in ENDED else None,
            drift=None if row.hook_id is None else _drift(row.drift),
        )
        for row in rows
    ]


def _errors(stored: dict[str, int] | None) -> dict[str, int]:
    errors = dict.fromkeys(REASONS, 0)
    for reason, count in (stored or {}).items():
        key = reason if reason in errors else OTHER
        errors[key] = errors.get(key, 0) + int(count)
    return errors


def _drift(stored: str | None) -> frozenset[str]:
    """The kinds named in the row's comma-separated ``drift``, known ones only."""
    return frozenset(kind for kind in (stored or "").split(",") if kind in DRIFTS)
