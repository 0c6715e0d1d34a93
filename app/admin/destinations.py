"""The admin API's destinations, where processed events are forwarded: listed with what
they did and have waiting, added, changed, paused and resumed, removed, and their forwards
replayed, through the service functions the CLI and the console call, with the same audit
entries. Secret settings (a broker URL with its password, a signing secret) are taken in a
body and never answered: a destination is answered as ``described`` gives it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import cast

from flask.typing import ResponseReturnValue
from sqlalchemy.exc import IntegrityError

from hooklatch.admin.blueprint import bp, store_errors_as_503
from hooklatch.admin.inputs import (
    MAX_ID,
    api_actor,
    flag,
    json_object,
    known_fields,
    moment,
    text_field,
)
from hooklatch.errors import BadRequest, Conflict, storable
from hooklatch.forwarding.destinations import UNCHANGED, Filter, ReplaySet
from hooklatch.forwarding.models import DEAD
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.runtime import current_runtime
from hooklatch.services import forwarding

ADD_FIELDS = frozenset({"name", "kind", "settings", "filter", "rate_limit", "requested_by"})
CHANGE_FIELDS = frozenset({"settings", "filter", "rate_limit", "requested_by"})
FILTER_FIELDS = frozenset({"endpoint", "provider", "types"})
REPLAY_FIELDS = frozenset(
    {"statuses", "since", "until", "type", "event_ids", "dry_run", "reason", "requested_by"}
)
ACTOR_ONLY = frozenset({"requested_by"})


@bp.get("/destinations")
def list_destinations() -> ResponseReturnValue:
    """By name, each with what it did and has waiting."""
    with store_errors_as_503():
        return {"destinations": forwarding.list_destinations(current_runtime())}


@bp.post("/destinations")
def add_destination() -> ResponseReturnValue:
    """``{name, kind, settings, filter?, rate_limit?}``: 201 with the destination, its
    secret settings named by their fingerprint, never answered."""
    data = known_fields(json_object(), ADD_FIELDS)
    name, kind = _required(data, "name"), _required(data, "kind")
    with store_errors_as_503():
        try:
            body = forwarding.add_destination(
                current_runtime(),
                name=name,
                kind=kind,
                given=_settings(data),
                selects=_filter(data.get("filter"), Filter()),
                rate_limit=_rate(data),
                actor=api_actor(data),
            )
        except IntegrityError as exc:  # the same name, added at the same moment elsewhere
            raise Conflict(
                f"a destination is named {name!r} already", reason="destination_exists"
            ) from exc
    return body, 201, {"Location": f"{bp.url_prefix}/destinations/{body['id']}"}


@bp.get("/destinations/<destination>")
def show_destination(destination: str) -> ResponseReturnValue:
    with store_errors_as_503():
        return forwarding.show_destination(current_runtime(), destination)


@bp.patch("/destinations/<destination>")
def change_destination(destination: str) -> ResponseReturnValue:
    """``{settings?, filter?, rate_limit?}``: ``settings`` all of them, as adding takes
    them; a field of ``filter`` left out stays as it is; ``rate_limit`` null is none."""
    runtime = current_runtime()
    data = known_fields(json_object(), CHANGE_FIELDS)
    if not data.keys() - ACTOR_ONLY:
        raise BadRequest(
            "nothing to change: give settings, filter or rate_limit", reason="bad_parameter"
        )
    with store_errors_as_503():
        selects = None
        if "filter" in data:
            known = cast(JSONObject, forwarding.show_destination(runtime, destination)["filter"])
            selects = _filter(data["filter"], _as_filter(known))
        return forwarding.change_destination(
            runtime,
            destination,
            given=_settings(data) if "settings" in data else None,
            selects=selects,
            rate_limit=_rate(data) if "rate_limit" in data else UNCHANGED,
            actor=api_actor(data),
        )


@bp.delete("/destinations/<destination>")
def remove_destination(destination: str) -> ResponseReturnValue:
    """The destination and its forwards: those waiting are never sent."""
    data = known_fields(json_object(), ACTOR_ONLY)
    with store_errors_as_503():
        return forwarding.remove_destination(current_runtime(), destination, actor=api_actor(data))


@bp.post("/destinations/<destination>/pause")
def pause_destination(destination: str) -> ResponseReturnValue:
    """Forwards keep being recorded; none is sent."""
    return _set_paused(destination, True)


@bp.post("/destinations/<destination>/resume")
def resume_destination(destination: str) -> ResponseReturnValue:
    """The oldest forwards go first, under the rate limit."""
    return _set_paused(destination, False)


def _set_paused(ref: str, paused: bool) -> JSONObject:
    data = known_fields(json_object(), ACTOR_ONLY)
    with store_errors_as_503():
        return forwarding.pause_destination(
            current_runtime(), ref, paused=paused, actor=api_actor(data)
        )


@bp.post("/destinations/<destination>/replay")
def replay_forwards(destination: str) -> ResponseReturnValue:
    """``{statuses?, since?, until?, type?, event_ids?, dry_run?, reason}``: the forwards
    chosen (dead ones, by default) go again with their own keys; a dry run counts them."""
    data = known_fields(json_object(), REPLAY_FIELDS)
    dry_run = flag(data, "dry_run")
    reason = text_field(data, "reason")
    if not dry_run and not reason:
        raise BadRequest("a replay needs a reason (or dry_run)", reason="reason_required")
    statuses = _texts(data, "statuses", reason="bad_replay_filter")
    chosen = ReplaySet(
        statuses=(DEAD,) if statuses is None else tuple(statuses),
        since=moment(data, "since", reason="bad_replay_filter"),
        until=moment(data, "until", reason="bad_replay_filter"),
        type_glob=_replay_text(data, "type"),
        event_ids=_event_ids(data),
    )
    with store_errors_as_503():
        return forwarding.replay_forwards(
            current_runtime(),
            destination,
            chosen,
            dry_run=dry_run,
            actor=api_actor(data),
            reason=reason,
        )


# What the bodies hold.


def _required(data: JSONObject, name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value.strip() or not storable(value):
        raise BadRequest(f"{name} is required, as text", reason="bad_destination")
    return value


def _settings(data: JSONObject) -> dict[str, str]:
    """The kind's settings, secret ones included: an object of text. The message names
    a setting at most, never a value."""
    values = data.get("settings", {})
    if not isinstance(values, dict):
        raise BadRequest("settings must be an object of text values", reason="bad_destination")
    for name, value in values.items():
        if not (isinstance(value, str) and storable(value) and storable(name)):
            raise BadRequest(
                f"setting {name[:40]!r} must be text (no NUL character)", reason="bad_destination"
            )
    return {str(name): str(value) for name, value in values.items()}


def _filter(given: JSON, known: Filter) -> Filter:
    """``{endpoint?, provider?, types?}``: a field left out is as ``known`` has it; null
    (or "", or []) is any."""
    if given is None:
        return known
    if not isinstance(given, dict):
        raise BadRequest("filter must be an object", reason="bad_destination")
    known_fields(given, FILTER_FIELDS)
    endpoint, provider = known.endpoint_id, known.provider
    if "endpoint" in given:
        endpoint = _filter_text(given, "endpoint")
    if "provider" in given:
        provider = _filter_text(given, "provider")
    types = known.types
    if "types" in given:
        types = tuple(_texts(given, "types", reason="bad_destination") or ())
    return Filter(endpoint, provider, types)


def _as_filter(shown: Mapping[str, JSON]) -> Filter:
    types = shown["types"]
    return Filter(
        str(shown["endpoint_id"]) if shown["endpoint_id"] else None,
        str(shown["provider"]) if shown["provider"] else None,
        tuple(str(t) for t in types) if isinstance(types, list) else (),
    )


def _filter_text(data: Mapping[str, JSON], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not (isinstance(value, str) and storable(value)):
        raise BadRequest(f"filter's {name} must be text or null", reason="bad_destination")
    return value or None


def _rate(data: Mapping[str, JSON]) -> float | None:
    """A number of forwards a second; null (or left out) is none."""
    value = data.get("rate_limit")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(float(value))
    ):
        raise BadRequest(
            "rate_limit must be a number of forwards a second, or null", reason="bad_destination"
        )
    return float(value)


def _texts(data: Mapping[str, JSON], name: str, *, reason: str) -> list[str] | None:
    values = data.get(name)
    if values is None:
        return None
    if not isinstance(values, list) or not all(
        isinstance(v, str) and v and storable(v) for v in values
    ):
        raise BadRequest(f"{name} must be a list of non-empty text", reason=reason)
    return [str(v) for v in values]


def _replay_text(data: Mapping[str, JSON], name: str) -> str | None:
    value = data.get(name)
    if value is not None and not (isinstance(value, str) and value and storable(value)):
        raise BadRequest(f"{name} must be non-empty text", reason="bad_replay_filter")
    return value


def _event_ids(data: Mapping[str, JSON]) -> tuple[int, ...]:
    values = data.get("event_ids") or []
    if not isinstance(values, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_ID for v in values
    ):
        raise BadRequest(
            "event_ids must be a list of hooklatch event ids", reason="bad_replay_filter"
        )
    return tuple(v for v in values if isinstance(v, int))
