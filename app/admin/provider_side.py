"""The admin API's routes for an endpoint's provider side: its API credential (set, rotated,
removed), its webhook at the provider (registered, read back, removed) and its reconcile
runs, asked for here and carried out by the relays. Through the service functions the CLI
and the console call, with the same audit entries; a credential is answered by its field
names and fingerprint, never its values."""

from __future__ import annotations

from flask import request
from flask.typing import ResponseReturnValue

from hooklatch.admin.blueprint import bp, store_errors_as_503
from hooklatch.admin.inputs import (
    MAX_ID,
    api_actor,
    credential,
    flag,
    json_object,
    known_fields,
    moment,
    text_field,
    text_list,
    whole_number,
)
from hooklatch.events.serialize import MAX_LIST_LIMIT
from hooklatch.providers.remote import Place
from hooklatch.reconcile.runs import RunRequest
from hooklatch.runtime import current_runtime
from hooklatch.services.provider_side import (
    check_webhook,
    provider_side,
    reconcile_run,
    reconcile_runs,
    register,
    remove_credential,
    request_reconcile,
    set_credential,
    unregister,
)

CREDENTIAL_FIELDS = frozenset({"credential", "api_url", "scope", "hook_id", "requested_by"})
PLACE_FIELDS = ("api_url", "scope", "hook_id")
RECONCILE_FIELDS = frozenset({"dry_run", "since", "everything", "requested_by"})
ACTOR_ONLY = frozenset({"requested_by"})


@bp.get("/endpoints/<endpoint>/provider-side")
def show_provider_side(endpoint: str) -> ResponseReturnValue:
    """What is stored of the provider's side; no call to the provider."""
    with store_errors_as_503():
        return provider_side(current_runtime(), endpoint)


@bp.put("/endpoints/<endpoint>/credential")
def put_credential(endpoint: str) -> ResponseReturnValue:
    """``{credential, api_url?, scope?, hook_id?}``: set or rotate the credential; with
    any of ``api_url``, ``scope``, ``hook_id``, say where its webhook lives (linking one
    made by hand)."""
    data = known_fields(json_object(), CREDENTIAL_FIELDS)
    values = credential(data)
    where = {name: text_field(data, name) or None for name in PLACE_FIELDS}
    place = Place(**where) if any(where.values()) else None
    with store_errors_as_503():
        return set_credential(
            current_runtime(), endpoint, values, actor=api_actor(data), place=place
        )


@bp.delete("/endpoints/<endpoint>/credential")
def delete_credential(endpoint: str) -> ResponseReturnValue:
    data = known_fields(json_object(), ACTOR_ONLY)
    with store_errors_as_503():
        return remove_credential(current_runtime(), endpoint, actor=api_actor(data))


@bp.post("/endpoints/<endpoint>/register")
def register_webhook(endpoint: str) -> ResponseReturnValue:
    """``{event_types?}``: create the webhook at the provider (none given: those asked
    for before, else every type); its signing secret is stored, never answered."""
    data = known_fields(json_object(), frozenset({"event_types", "requested_by"}))
    event_types = text_list(data, "event_types")
    with store_errors_as_503():
        return register(current_runtime(), endpoint, event_types=event_types, actor=api_actor(data))


@bp.delete("/endpoints/<endpoint>/register")
def unregister_webhook(endpoint: str) -> ResponseReturnValue:
    """Delete the webhook at the provider; the endpoint stays."""
    data = known_fields(json_object(), ACTOR_ONLY)
    with store_errors_as_503():
        return unregister(current_runtime(), endpoint, actor=api_actor(data))


@bp.post("/endpoints/<endpoint>/provider-side/check")
def check_provider_side(endpoint: str) -> ResponseReturnValue:
    """Read back now what the provider holds for the webhook (one API call), noting drift."""
    known_fields(json_object(), ACTOR_ONLY)
    with store_errors_as_503():
        return check_webhook(current_runtime(), endpoint)


@bp.post("/endpoints/<endpoint>/reconcile")
def reconcile(endpoint: str) -> ResponseReturnValue:
    """``{dry_run?, since?, everything?}``: a run asked of the relays (202); the answer's
    ``reconcile.requested`` shows it until a relay takes it."""
    data = known_fields(json_object(), RECONCILE_FIELDS)
    asked = RunRequest(
        trigger="api",
        requested_by=api_actor(data),
        dry_run=flag(data, "dry_run"),
        since=moment(data, "since"),
        everything=flag(data, "everything"),
    )
    with store_errors_as_503():
        return request_reconcile(current_runtime(), endpoint, asked), 202


@bp.get("/endpoints/<endpoint>/reconcile/runs")
def runs(endpoint: str) -> ResponseReturnValue:
    """The latest runs, newest first."""
    limit = whole_number("limit", request.args.get("limit", "20"), high=MAX_LIST_LIMIT)
    with store_errors_as_503():
        return {"runs": reconcile_runs(current_runtime(), endpoint, limit=limit)}


@bp.get("/endpoints/<endpoint>/reconcile/runs/<run_id>")
def run(endpoint: str, run_id: str) -> ResponseReturnValue:
    number = whole_number("the run id", run_id, high=MAX_ID)
    with store_errors_as_503():
        return reconcile_run(current_runtime(), endpoint, number)
