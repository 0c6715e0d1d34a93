"""The admin API's events, replays, audit log and ordering routes: bearer-token
protected (hooklatch.admin.blueprint); replay, ordering changes and key releases are
explicit and audited."""

from __future__ import annotations

from typing import Any

from flask import request
from sqlalchemy.exc import SQLAlchemyError

from hooklatch import audit
from hooklatch.admin.blueprint import bp
from hooklatch.admin.inputs import MAX_ID, api_actor, json_object, text_field, whole_number
from hooklatch.endpoints.service import get_endpoint
from hooklatch.errors import BadRequest, NotFound, StoreUnavailable
from hooklatch.events import batches
from hooklatch.events.browse import EventFilter, page
from hooklatch.events.models import Event
from hooklatch.events.replay import replay_one
from hooklatch.events.serialize import (
    MAX_LIST_LIMIT,
    describe_event,
    describe_replay,
    event_history,
)
from hooklatch.ordering.service import (
    blocked_keys,
    count_blocked,
    describe_ordering,
    release_key,
    set_ordering,
)
from hooklatch.runtime import current_runtime


@bp.post("/events/<event_id>/replay")
def replay(event_id: str) -> Any:
    runtime = current_runtime()
    number = whole_number("the event id", event_id, high=MAX_ID)
    data = json_object()
    actor = api_actor(data)
    reason = text_field(data, "reason")
    try:
        with runtime.session_factory.begin() as session:
            row = replay_one(
                session,
                number,
                actor=actor,
                reason=reason,
                now=runtime.clock(),
            )
            body = describe_replay(row)
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    runtime.wake_dispatcher()
    return body, 202


@bp.get("/events")
def events() -> Any:
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
def bulk_replay() -> Any:
    """A bulk replay of what a filter matches: ``dry_run`` says how many and shows the
    oldest; otherwise, with a ``reason``, the batch starts (202) and runs in the relays."""
    runtime = current_runtime()
    data = json_object()
    dry_run = data.pop("dry_run", False)
    if not isinstance(dry_run, bool):
        raise BadRequest("dry_run must be true or false", reason="bad_parameter")
    reason = text_field(data, "reason")
    actor = api_actor(data)
    watermark = batches.watermark_of(data.pop("watermark", None))
    data.pop("reason", None)
    data.pop("requested_by", None)
    now = runtime.clock()
    chosen = EventFilter.parse(data, now=now)
    settings = runtime.settings
    try:
        if dry_run:
            with runtime.session_factory() as session:
                found = batches.plan(session, chosen, cap=settings.replay_batch_max)
                return {
                    "matched": found.matched,
                    "over_cap": found.over_cap,
                    "cap": found.cap,
                    # Send it back with the reason: the batch replays nothing stored since.
                    "watermark": found.watermark,
                    "filter": chosen.as_dict(),
                    "sample": [describe_event(e) for e in found.sample],
                }
        with runtime.session_factory.begin() as session:
            batch = batches.start(
                session,
                chosen,
                actor=actor,
                reason=reason or "",
                cap=settings.replay_batch_max,
                rate=settings.replay_batch_rate,
                now=now,
                watermark=watermark,
            )
            body = batches.describe(session, batch)
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    runtime.wake_dispatcher()
    return body, 202


@bp.get("/replays")
def bulk_replays() -> Any:
    with current_runtime().session_factory() as session:
        return {"batches": [batches.describe(session, b) for b in batches.recent(session)]}


@bp.get("/replays/<batch_id>")
def bulk_replay_progress(batch_id: str) -> Any:
    number = whole_number("the batch id", batch_id, high=MAX_ID)
    with current_runtime().session_factory() as session:
        return batches.describe(session, batches.get(session, number))


@bp.post("/replays/<batch_id>/cancel")
def bulk_replay_cancel(batch_id: str) -> Any:
    runtime = current_runtime()
    number = whole_number("the batch id", batch_id, high=MAX_ID)
    actor = api_actor(json_object())
    with runtime.session_factory.begin() as session:
        cancelled = batches.cancel(session, number, actor=actor, now=runtime.clock())
        return {
            **batches.describe(session, cancelled.batch),
            "replays_cancelled": cancelled.replays,
        }


@bp.get("/audit")
def audit_log() -> Any:
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
def event(event_id: str) -> Any:
    number = whole_number("the event id", event_id, high=MAX_ID)
    with current_runtime().session_factory() as session:
        row = session.get(Event, number)
        if row is None:
            raise NotFound(f"no event {number}")
        return event_history(session, row)


@bp.get("/keys/blocked")
def keys_blocked() -> Any:
    """Keys whose next event cannot run (parked by a dead event, or failing at their first
    event), longest blocked first; ``total`` counts them all."""
    limit = whole_number("limit", request.args.get("limit", "100"), high=MAX_LIST_LIMIT)
    with current_runtime().session_factory() as session:
        shown = [b.as_json() for b in blocked_keys(session, limit=limit)]
        total = count_blocked(session) if len(shown) == limit else len(shown)
    return {"blocked_keys": shown, "total": total}


@bp.post("/endpoints/<endpoint>/keys/release")
def release(endpoint: str) -> Any:
    """Let a key parked by a dead event go on (``{"key": ..., "reason": ...}``); 404
    ``not_parked`` if it is not parked."""
    runtime = current_runtime()
    data = json_object()
    key = text_field(data, "key")
    if not key:
        raise BadRequest("key is required: the ordering key to release", reason="bad_parameter")
    try:
        with runtime.session_factory.begin() as session:
            body = release_key(
                session,
                get_endpoint(session, endpoint),
                key,
                actor=api_actor(data),
                reason=text_field(data, "reason") or "",
                now=runtime.clock(),
            )
    except SQLAlchemyError as exc:
        raise StoreUnavailable() from exc
    runtime.wake_dispatcher()
    return body


@bp.get("/endpoints/<endpoint>/ordering")
def ordering(endpoint: str) -> Any:
    with current_runtime().session_factory() as session:
        return describe_ordering(get_endpoint(session, endpoint))


ORDERING_FIELDS = {"policy": str, "dead": str, "hold_seconds": int, "key_path": str}


@bp.put("/endpoints/<endpoint>/ordering")
def change_ordering(endpoint: str) -> Any:
    """``{policy, dead, hold_seconds, key_path}``: a field left out stays as it is;
    ``key_path`` null (or "") keys events by the provider's key again. 400 ``bad_ordering``
    for settings that cannot go together."""
    runtime = current_runtime()
    data = json_object()
    unknown = sorted(data.keys() - {*ORDERING_FIELDS, "requested_by"})
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}", reason="bad_ordering")
    given = {name: data[name] for name in ORDERING_FIELDS if name in data}
    if "key_path" in given and given["key_path"] is None:
        given["key_path"] = ""
    for name, value in given.items():
        kind = ORDERING_FIELDS[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            what = "a whole number" if kind is int else "text"
            raise BadRequest(f"{name} must be {what}", reason="bad_ordering")
        if kind is str:
            given[name] = text_field(given, name)
    with runtime.session_factory.begin() as session:
        row = get_endpoint(session, endpoint)
        set_ordering(session, row, actor=api_actor(data), now=runtime.clock(), **given)
        return describe_ordering(row)
