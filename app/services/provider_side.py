"""The provider's side of an endpoint as the operator handles it, the same under the
CLI, the admin API and the console: its API credential, registering its URL with the
provider, what the provider holds for it (drift), removing it, and reconcile runs. Every
change is audited in its transaction; a credential or secret is named by its fingerprint,
never shown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.endpoints import changes
from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.serialize import describe_endpoint
from hooklatch.endpoints.service import create_endpoint, endpoint_url, get_endpoint
from hooklatch.errors import BadRequest, NotFound
from hooklatch.jsontypes import JSONObject
from hooklatch.providers.remote import Place
from hooklatch.reconcile import credentials, hooks
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)
from hooklatch.reconcile.runs import RunRequest, recent_runs, request_run, run_json
from hooklatch.runtime import Runtime, reconciler


@dataclass(frozen=True)
class NewRegistration:
    """An endpoint to create and register with its provider in one go."""

    provider: str
    name: str
    credential: Mapping[str, str]
    event_types: Sequence[str]
    place: Place = field(default_factory=Place)
    options: Mapping[str, str] | None = None


def _audit(
    runtime: Runtime,
    session: Session,
    endpoint: Endpoint,
    action: str,
    details: JSONObject,
    *,
    actor: str,
) -> None:
    audit.record(
        session,
        actor=actor,
        action=action,
        target=f"endpoint {endpoint.id}",
        now=runtime.clock(),
        details=details,
    )


def set_credential(
    runtime: Runtime,
    endpoint_ref: str,
    values: Mapping[str, str],
    *,
    actor: str,
    place: Place | None = None,
) -> JSONObject:
    """Store (or rotate) the endpoint's credential; with ``place``, say where its webhook
    lives too (linking a webhook made by hand). Returns ``provider_side``."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        provider = runtime.provider(endpoint.provider)
        row = credentials.set_credential(session, endpoint, provider, values, box=runtime.box)
        details: JSONObject = {"fields": row.fields, "fingerprint": row.fingerprint}
        _audit(runtime, session, endpoint, "credential_set", details, actor=actor)
        if place is not None:
            hooks.place_hook(session, endpoint, place)
            linked: JSONObject = {"scope": place.scope, "hook_id": place.hook_id}
            _audit(runtime, session, endpoint, "webhook_linked", linked, actor=actor)
            # A place the provider's API cannot take (bad_place) is refused now, not at
            # each run: nothing is kept.
            credentials.reach(session, endpoint, provider, box=runtime.box)
    return provider_side(runtime, endpoint_ref)


def remove_credential(runtime: Runtime, endpoint_ref: str, *, actor: str) -> JSONObject:
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        row = credentials.remove_credential(session, endpoint)
        details: JSONObject = {"fingerprint": row.fingerprint}
        _audit(runtime, session, endpoint, "credential_removed", details, actor=actor)
    return provider_side(runtime, endpoint_ref)


def add_registered(runtime: Runtime, new: NewRegistration, *, actor: str) -> JSONObject:
    """Create the endpoint, store its credential, and register its URL with the provider
    for the event types chosen; the signing secret (the provider's, or one hooklatch
    makes) is stored at once and never returned. If the registration fails, the endpoint
    stays, with its credential and no secret (it refuses every delivery), and the error
    says why: `hooklatch endpoints register` tries again."""
    provider = runtime.provider(new.provider)
    with runtime.session_factory.begin() as session:
        endpoint, _ = create_endpoint(
            session,
            provider=provider,
            name=new.name,
            secrets=[],
            box=runtime.box,
            options=new.options,
        )
        changes.created(session, endpoint, actor=actor, now=runtime.clock())
        row = credentials.set_credential(
            session, endpoint, provider, new.credential, box=runtime.box
        )
        details: JSONObject = {"fields": row.fields, "fingerprint": row.fingerprint}
        _audit(runtime, session, endpoint, "credential_set", details, actor=actor)
        hooks.place_hook(session, endpoint, new.place, event_types=list(new.event_types))
        credentials.reach(session, endpoint, provider, box=runtime.box)  # bad_place: nothing kept
        endpoint_id = endpoint.id
    return register(runtime, endpoint_id, event_types=new.event_types, actor=actor)


def register(
    runtime: Runtime, endpoint_ref: str, *, event_types: Sequence[str] | None, actor: str
) -> JSONObject:
    """Register the endpoint's URL with its provider (the credential stored already), for
    these event types (None: those asked for before, else every type)."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        reached = credentials.reach(
            session, endpoint, runtime.provider(endpoint.provider), box=runtime.box
        )
        hook = session.get(ProviderHook, endpoint.id)
        if event_types is None:
            event_types = (hook.event_types if hook is not None else None) or []
        made = hooks.register(
            session,
            endpoint,
            reached,
            url=endpoint_url(runtime.settings.public_url, endpoint),
            event_types=event_types,
            box=runtime.box,
            now=runtime.clock(),
        )
        details: JSONObject = {
            "hook_id": made.hook_id,
            "event_types": list(made.event_types),
            "secrets": [s.fingerprint for s in endpoint.secrets],
        }
        _audit(runtime, session, endpoint, "webhook_registered", details, actor=actor)
    return endpoint_with_provider_side(runtime, endpoint_ref)


def check_webhook(runtime: Runtime, endpoint_ref: str) -> JSONObject:
    """Read back now what the provider holds for the endpoint's webhook (one API call),
    noting any drift; returns ``provider_side``."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        reached = credentials.reach(
            session, endpoint, runtime.provider(endpoint.provider), box=runtime.box
        )
        url = endpoint_url(runtime.settings.public_url, endpoint)
        hooks.check(session, endpoint, reached, url=url, now=runtime.clock())
    return provider_side(runtime, endpoint_ref)


def unregister(runtime: Runtime, endpoint_ref: str, *, actor: str) -> JSONObject:
    """Delete the endpoint's webhook at its provider (gone already is no error)."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        reached = credentials.reach(
            session, endpoint, runtime.provider(endpoint.provider), box=runtime.box
        )
        hook_id = reached.place.hook_id
        existed = hooks.unregister(session, endpoint, reached)
        details: JSONObject = {"hook_id": hook_id, "existed": existed}
        _audit(runtime, session, endpoint, "webhook_unregistered", details, actor=actor)
    return provider_side(runtime, endpoint_ref)


def remove_endpoint(runtime: Runtime, endpoint_ref: str, *, remote: bool, actor: str) -> JSONObject:
    """Delete the endpoint with its events; with ``remote``, its webhook at the provider
    first (a failure there stops here, removing nothing). An endpoint registered at its
    provider must say which (``remote``), or the provider goes on delivering to a URL
    that is gone."""
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        endpoint_id, name = endpoint.id, endpoint.name
        hook = session.get(ProviderHook, endpoint.id)
        registered = hook is not None and hook.hook_id is not None
    if remote and registered:
        unregister(runtime, endpoint_id, actor=actor)
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_id)
        details: JSONObject = {
            "name": name,
            "provider": endpoint.provider,
            "webhook_removed": remote and registered,
        }
        _audit(runtime, session, endpoint, "endpoint_removed", details, actor=actor)
        session.execute(delete(Endpoint).where(Endpoint.id == endpoint_id))
    return {
        "id": endpoint_id,
        "name": name,
        "removed": True,
        "webhook_removed": remote and registered,
    }


def is_registered(runtime: Runtime, endpoint_ref: str) -> bool:
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        hook = session.get(ProviderHook, endpoint.id)
        return hook is not None and hook.hook_id is not None


def reconcile_now(runtime: Runtime, endpoint_ref: str, request: RunRequest) -> JSONObject:
    """Run a reconcile of the endpoint in this process (the CLI), audited unless a dry
    run; returns the run (``run_json``). Busy (409) while another run holds it."""
    run = reconciler(runtime).run(endpoint_ref, request)
    if not request.dry_run:
        with runtime.session_factory.begin() as session:
            endpoint = get_endpoint(session, endpoint_ref)
            details: JSONObject = {"run": run["id"], "status": run["status"]}
            _audit(runtime, session, endpoint, "reconcile_run", details, actor=request.requested_by)
    runtime.wake_dispatcher()
    return run


def request_reconcile(runtime: Runtime, endpoint_ref: str, request: RunRequest) -> JSONObject:
    """Ask the relays for a run (the admin API, the console), audited; returns
    ``provider_side``, whose ``reconcile.requested`` shows it until a relay takes it."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        if not endpoint.enabled:
            raise BadRequest(
                f"endpoint {endpoint.id} is disabled: enable it to reconcile it",
                reason="endpoint_disabled",
            )
        if session.get(EndpointCredential, endpoint.id) is None:
            raise BadRequest(
                f"endpoint {endpoint.id} has no credential for its provider's API",
                reason="no_credential",
            )
        request_run(session, endpoint, request)
        details: JSONObject = {"dry_run": request.dry_run, "everything": request.everything}
        _audit(
            runtime, session, endpoint, "reconcile_requested", details, actor=request.requested_by
        )
    return provider_side(runtime, endpoint_ref)


def reconcile_runs(runtime: Runtime, endpoint_ref: str, *, limit: int) -> list[JSONObject]:
    """The endpoint's latest reconcile runs, newest first (``run_json``)."""
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        return recent_runs(session, endpoint.id, limit=limit)


def reconcile_run(runtime: Runtime, endpoint_ref: str, run_id: int) -> JSONObject:
    """One reconcile run of the endpoint; NotFound if it is another endpoint's."""
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        row = session.get(ReconcileRun, run_id)
        if row is None or row.endpoint_id != endpoint.id:
            raise NotFound(f"endpoint {endpoint.id} has no reconcile run {run_id}")
        return run_json(row)


def drifted(runtime: Runtime) -> dict[str, list[str]]:
    """Each endpoint whose webhook at the provider drifted, with how (``ProviderHook.drift``)."""
    with runtime.session_factory() as session:
        rows = session.execute(
            select(ProviderHook.endpoint_id, ProviderHook.drift).where(
                ProviderHook.drift.is_not(None)
            )
        )
        return {endpoint_id: drift.split(",") for endpoint_id, drift in rows if drift}


def provider_side(runtime: Runtime, endpoint_ref: str, *, runs: int = 10) -> JSONObject:
    """The endpoint's provider side as every face shows it: its credential (field names
    and fingerprint), its webhook at the provider with any drift, and its reconcile
    (cursor, totals, a run asked for, the latest runs)."""
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        state = session.get(ReconcileState, endpoint.id)
        provider = runtime.providers.get(endpoint.provider)
        return {
            "api": bool(provider is not None and provider.credential_fields),
            "credential": credentials.described(session.get(EndpointCredential, endpoint.id)),
            "webhook": hooks.described(session.get(ProviderHook, endpoint.id)),
            "reconcile": _state_json(state),
            "runs": [*recent_runs(session, endpoint.id, limit=runs)],
        }


def _state_json(state: ReconcileState | None) -> JSONObject | None:
    if state is None:
        return None

    def when(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    return {
        "cursor": when(state.cursor),
        "next_run_at": when(state.next_run_at),
        "last_success_at": when(state.last_success_at),
        "running": state.lease_owner is not None,
        "requested": state.requested,
        "missing_total": state.missing_total,
        "present_total": state.present_total,
        "fetched_total": state.fetched_total,
        "redeliveries_total": state.redeliveries_total,
        "requests_total": state.requests_total,
        "runs_total": state.runs_total,
        "errors_total": dict(state.errors_total or {}),
    }


def endpoint_with_provider_side(runtime: Runtime, endpoint_ref: str) -> JSONObject:
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        described = describe_endpoint(endpoint, public_url=runtime.settings.public_url)
    return {**described, "provider_side": provider_side(runtime, endpoint_ref)}
