"""The admin API's events, replays, audit log and ordering routes: bearer-token
protected (hooklatch.admin.blueprint); replay, ordering changes and key releases are
explicit and audited (hooklatch.services)."""

from __future__ import annotations

from typing import TypeVar

from flask import request
from flask.typing import ResponseReturnValue

from hooklatch import audit
from hooklatch.admin.blueprint import bp, store_errors_as_503
from hooklatch.admin.inputs import MAX_ID, api_actor, json_object, text_field, whole_number
from hooklatch.errors import BadRequest, NotFound
from hooklatch.events.browse import EventFilter, page
from hooklatch.events.bulk_replays import watermark_of
from hooklatch.events.models import Event
from hooklatch.events.serialize import MAX_LIST_LIMIT, describe_event, event_history
from hooklatch.jsontypes import JSONObject
from hooklatch.ordering.service import blocked_page
from hooklatch.runtime import current_runtime
from hooklatch.services.ordering import (
    change_endpoint_ordering,
    release_parked_key,
    show_ordering,
)
from hooklatch.services.replays import (
    cancel_bulk_replay,
    plan_bulk_replay,
    recent_bulk_replays,
    replay_event,
    show_bulk_replay,
    start_bulk_replay,
)


@bp.post("/events/<event_id>/replay")
def replay(event_id: str) -> ResponseReturnValue:
    number = whole_number("the event id", event_id, high=MAX_ID)
    data = json_object()
    actor = api_actor(data)
    reason = text_field(data, "reason")
    with store_errors_as_503():
        return replay_event(current_runtime(), number, actor=actor, reason=reason), 202


@bp.get("/events")
def events() -> ResponseReturnValue:
    """Events newest first, filtered (status, provider, endpoint, type, external_id,
    since, until), a keyset page at a time: ``next`` is the ``before`` of the next page."""
    runtime = current_runtime()
    args = request.args.to_dict()
    limit = whole_number("limit", args.pop("limit", "50"), high=MAX_LIST_LIMIT)
    before_text = args.pop("before", None)
    before = whole_number("before", before_text, high=MAX_ID) if before_text else None
    chosen = EventFilter.parse(args, now=runtime.clock())
    with runtime.session_factory() as session:
        rows, after = page(session, chosen, before=before, limit=limit)
        return {"events": [describe_event(e) for e in rows], "next": after}


@bp.post("/replays")
def bulk_replay() -> ResponseReturnValue:
    """A bulk replay of what a filter matches: ``dry_run`` says how many and shows the
    oldest; otherwise, with a ``reason``, it starts (202) and runs in the relays."""
    runtime = current_runtime()
    data = json_object()
    dry_run = data.pop("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BadRequest("dry_run must be true or false", reason="bad_parameter")
    reason = text_field(data, "reason")
    actor = api_actor(data)
    watermark = watermark_of(data.pop("watermark", None))
    data.pop("reason", None)
    data.pop("requested_by", None)
    chosen = EventFilter.parse(data, now=runtime.clock())
    with store_errors_as_503():
        if dry_run:
            return plan_bulk_replay(runtime, chosen).as_json()
        started = start_bulk_replay(
            runtime, chosen, actor=actor, reason=reason or "", watermark=watermark
        )
    return started, 202


@bp.get("/replays")
def bulk_replays() -> ResponseReturnValue:
    return {"batches": recent_bulk_replays(current_runtime())}


@bp.get("/replays/<batch_id>")
def bulk_replay_progress(batch_id: str) -> ResponseReturnValue:
    number = whole_number("the batch id", batch_id, high=MAX_ID)
    return show_bulk_replay(current_runtime(), number)


@bp.post("/replays/<batch_id>/cancel")
def bulk_replay_cancel(batch_id: str) -> ResponseReturnValue:
    number = whole_number("the batch id", batch_id, high=MAX_ID)
    actor = api_actor(json_object())
    return cancel_bulk_replay(current_runtime(), number, actor=actor)


@bp.get("/audit")
def audit_log() -> ResponseReturnValue:
    args = request.args.to_dict()
    limit = whole_number("limit", args.get("limit", "50"), high=MAX_LIST_LIMIT)
    before = whole_number("before", args["before"], high=MAX_ID) if "before" in args else None
    with current_runtime().session_factory() as session:
        return {
            "entries": [
                audit.describe(e) for e in audit.recent(session, before=before, limit=limit)
            ]
        }


@bp.get("/events/<event_id>")
def event(event_id: str) -> ResponseReturnValue:
    number = whole_number("the event id", event_id, high=MAX_ID)
    with current_runtime().session_factory() as session:
        row = session.get(Event, number)
        if row is None:
            raise NotFound(f"no event {number}")
        return event_history(session, row)


@bp.get("/keys/blocked")
def keys_blocked() -> ResponseReturnValue:
    """Keys whose next event cannot run (parked by a dead event, or failing at their first
    event), longest blocked first; ``total`` counts them all."""
    limit = whole_number("limit", request.args.get("limit", "100"), high=MAX_LIST_LIMIT)
    with current_runtime().session_factory() as session:
        found, total = blocked_page(session, limit=limit)
    return {"blocked_keys": [b.as_json() for b in found], "total": total}


@bp.post("/endpoints/<endpoint>/keys/release")
def release(endpoint: str) -> ResponseReturnValue:
    """Let a key parked by a dead event go on (``{"key": ..., "reason": ...}``); 404
    ``not_parked`` if it is not parked."""
    data = json_object()
    key = text_field(data, "key")
    if not key:
        raise BadRequest("key is required: the ordering key to release", reason="bad_parameter")
    actor = api_actor(data)
    reason = text_field(data, "reason") or ""
    with store_errors_as_503():
        return release_parked_key(current_runtime(), endpoint, key, actor=actor, reason=reason)


@bp.get("/endpoints/<endpoint>/ordering")
def ordering(endpoint: str) -> ResponseReturnValue:
    return show_ordering(current_runtime(), endpoint)


ORDERING_FIELDS = ("policy", "dead", "hold_seconds", "key_path")
Setting = TypeVar("Setting", str, int)


@bp.put("/endpoints/<endpoint>/ordering")
def change_ordering(endpoint: str) -> ResponseReturnValue:
    """``{policy, dead, hold_seconds, key_path}``: a field left out stays as it is;
    ``key_path`` null (or "") keys events by the provider's key again. 400 ``bad_ordering``
    for settings that cannot go together."""
    data = json_object()
    unknown = sorted(data.keys() - {*ORDERING_FIELDS, "requested_by"})
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}", reason="bad_ordering")
    policy, dead = _given(data, "policy", str), _given(data, "dead", str)
    hold_seconds, key_path = _given(data, "hold_seconds", int), _given(data, "key_path", str)
    change = change_endpoint_ordering(
        current_runtime(),
        endpoint,
        actor=api_actor(data),
        policy=policy,
        dead=dead,
        hold_seconds=hold_seconds,
        key_path=key_path,
    )
    return change.ordering


def _given(data: JSONObject, name: str, kind: type[Setting]) -> Setting | None:
    """A setting as given (text the database can store, or a whole number); None if left
    out. ``key_path`` null is ""."""
    if name not in data:
        return None
    value = "" if name == "key_path" and data[name] is None else data[name]
    if not isinstance(value, kind) or isinstance(value, bool):
        raise BadRequest(
            f"{name} must be {'a whole number' if kind is int else 'text'}", reason="bad_ordering"
        )
    if isinstance(value, str):
        text_field({name: value}, name)
    return value
