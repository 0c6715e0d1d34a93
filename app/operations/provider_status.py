"""The provider's side of each endpoint with an API credential, as `hooklatch status`
shows it: its last reconcile run, its cursor's age, the API's errors, and how its webhook
at the provider drifted. A few rows per such endpoint: the credentials, reconcile states
and hooks are one row each, and the last run is found by the runs' endpoint index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hooklatch.display import utc_time, visible
from hooklatch.endpoints.models import Endpoint
from hooklatch.reconcile import credentials, hooks
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)
from hooklatch.reconcile.runs import CUT_SHORT, FAILED, run_json

# A run cut short for these reasons will not get further by itself: the credential is
# refused (revoked, expired) or lacks a scope.
REFUSED = ("unauthorized", "forbidden")


def provider_sides(session: Session, *, now: datetime) -> list[dict[str, Any]]:
    """Every endpoint with a credential for its provider's API, by id."""
    rows = session.execute(
        select(Endpoint, EndpointCredential)
        .join(EndpointCredential, EndpointCredential.endpoint_id == Endpoint.id)
        .order_by(Endpoint.id)
    ).all()
    ids = [endpoint.id for endpoint, _ in rows]
    if not ids:
        return []
    states = session.scalars(select(ReconcileState).where(ReconcileState.endpoint_id.in_(ids)))
    webhooks = session.scalars(select(ProviderHook).where(ProviderHook.endpoint_id.in_(ids)))
    latest = (
        select(func.max(ReconcileRun.id))
        .where(ReconcileRun.endpoint_id.in_(ids))
        .group_by(ReconcileRun.endpoint_id)
    )
    runs = session.scalars(select(ReconcileRun).where(ReconcileRun.id.in_(latest)))
    state_of = {row.endpoint_id: row for row in states}
    webhook_of = {row.endpoint_id: row for row in webhooks}
    run_of = {row.endpoint_id: row for row in runs}
    return [
        _side(
            endpoint,
            credential,
            state_of.get(endpoint.id),
            webhook_of.get(endpoint.id),
            run_of.get(endpoint.id),
            now,
        )
        for endpoint, credential in rows
    ]


def _side(
    endpoint: Endpoint,
    credential: EndpointCredential,
    state: ReconcileState | None,
    webhook: ProviderHook | None,
    run: ReconcileRun | None,
    now: datetime,
) -> dict[str, Any]:
    cursor = state.cursor if state is not None else None
    errors = dict(state.errors_total or {}) if state is not None else {}
    last = None
    if run is not None:
        last = run_json(run)
        del last["sample"]
    return {
        "endpoint_id": endpoint.id,
        "name": endpoint.name,
        "provider": endpoint.provider,
        "credential": credentials.described(credential),
        "cursor": cursor.isoformat() if cursor is not None else None,
        "cursor_age_seconds": (
            round((now - utc_time(cursor)).total_seconds(), 1) if cursor is not None else None
        ),
        "running": state is not None and state.lease_owner is not None,
        "missing_total": state.missing_total if state is not None else 0,
        "api_errors_total": sum(errors.values()),
        "errors_total": errors,
        "last_run": last,
        "webhook": hooks.described(webhook),
    }


def drift_texts(webhook: Mapping[str, Any] | None) -> list[str]:
    """How each way the webhook at the provider drifted reads: "disabled by the
    provider", "url changed to ...", "event types changed to ...", "deleted at the
    provider". What the provider holds is shown escaped (``visible``)."""
    if webhook is None:
        return []
    seen, out = webhook["seen"], []
    for drift in webhook["drift"] or []:
        if drift == hooks.URL_CHANGED:
            out.append(f"url changed to {visible(seen['url'] or '?')}")
        elif drift == hooks.EVENT_TYPES_CHANGED:
            shown = ", ".join(visible(t) for t in seen["event_types"] or []) or "none"
            out.append(f"event types changed to {shown}")
        elif drift == hooks.DISABLED:
            out.append("disabled by the provider")
        elif drift == hooks.DELETED:
            out.append("deleted at the provider")
        else:
            out.append(visible(drift))
    return out


def provider_problems(sides: Sequence[Mapping[str, Any]]) -> list[str]:
    """What needs a person: a webhook that drifted, and a last run that failed or was cut
    short because the provider refused the credential."""
    problems = []
    for side in sides:
        who = f"{side['endpoint_id']} ({visible(side['name'])})"
        drift = drift_texts(side["webhook"])
        if drift:
            problems.append(f"{who}: its webhook at {side['provider']}: {'; '.join(drift)}")
        run = side["last_run"]
        if run is None:
            continue
        if run["status"] == FAILED:
            problems.append(f"{who}: its last reconcile failed: {visible(run['error'] or '?')}")
        elif run["status"] == CUT_SHORT and run["stop_reason"] in REFUSED:
            problems.append(
                f"{who}: its last reconcile was cut short, {side['provider']}'s API refused "
                f"its credential ({run['stop_reason']}): hooklatch endpoints credential set"
            )
    return problems
