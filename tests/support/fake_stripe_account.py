"""What a Stripe account holds and how its API answers for it, for
tests/support/fake_stripe.py: events (listed newest first, for 30 days, by delivery
success) and webhook endpoints (created, read, updated, deleted)."""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tests.support.fake_stripe_params import (
    ApiError,
    Position,
    boolean,
    created_bounds,
    cursor_window,
    enabled_events_of,
    known_only,
    metadata_of,
    required,
    type_matches,
    valid_url,
)

HORIZON = 30 * 24 * 3600  # GET /v1/events goes back 30 days
API_VERSION = "2025-06-30.basil"
ALPHABET = string.ascii_letters + string.digits
# GET /v1/events takes at most this many names in `types`.
MAX_TYPES = 20
LIST_EVENTS = frozenset(
    {"created", "delivery_success", "ending_before", "expand", "limit"}
    | {"starting_after", "type", "types"}
)
LIST_ENDPOINTS = frozenset({"ending_before", "expand", "limit", "starting_after"})
CREATE_ENDPOINT = frozenset(
    {"api_version", "connect", "description", "enabled_events", "expand", "metadata", "url"}
)
UPDATE_ENDPOINT = frozenset(
    {"description", "disabled", "enabled_events", "expand", "metadata", "url"}
)


def new_id(prefix: str, length: int = 24) -> str:
    return prefix + "".join(secrets.choice(ALPHABET) for _ in range(length))


@dataclass
class Event:
    record: dict[str, object]  # the event object but pending_webhooks
    position: Position
    # The endpoints it is for: those enabled and listening for its type when it was made,
    # and any it was delivered to since; those that answered 2xx.
    targets: set[str] = field(default_factory=set)
    delivered: set[str] = field(default_factory=set)


class Account:
    """One account's events and webhook endpoints; the caller holds the lock."""

    def __init__(self, now: Callable[[], int]) -> None:
        self._now = now
        self.events: dict[str, Event] = {}
        self.endpoints: dict[str, dict[str, object]] = {}
        self.secrets: dict[str, str] = {}
        self._endpoint_positions: dict[str, Position] = {}
        self._made = 0

    def add_event(self, event_type: str, obj: Mapping[str, object], created: int) -> Event:
        """A new event, for every enabled endpoint listening for its type."""
        record: dict[str, object] = {
            "id": new_id("evt_"),
            "object": "event",
            "api_version": API_VERSION,
            "created": created,
            "data": {"object": dict(obj)},
            "livemode": False,
            "request": {"id": None, "idempotency_key": None},
            "type": event_type,
        }
        targets = {
            endpoint_id
            for endpoint_id, endpoint in self.endpoints.items()
            if endpoint["status"] == "enabled" and _listens(endpoint, event_type)
        }
        event = Event(record, self._position(created), targets)
        self.events[str(record["id"])] = event
        return event

    def attempted(self, event: Event, endpoint_id: str, status: int) -> None:
        """A delivery of the event to the endpoint, answered ``status`` (2xx: delivered)."""
        event.targets.add(endpoint_id)
        if 200 <= status < 300:
            event.delivered.add(endpoint_id)

    def route(self, method: str, path: str, params: dict[str, object]) -> object:
        resource, _, object_id = path.removeprefix("/v1/").partition("/")
        if resource == "events" and method == "GET" and "/" not in object_id:
            if not object_id:
                return self._list_events(params)
            known_only(params, {"expand"})
            return self.render(self._event(object_id))
        if resource == "webhook_endpoints" and "/" not in object_id:
            if not object_id and method in ("GET", "POST"):
                return (self._list_endpoints if method == "GET" else self.create_endpoint)(params)
            if object_id and method == "GET":
                known_only(params, {"expand"})
                return dict(self._endpoint(object_id, "webhook_endpoint"))
            if object_id and method == "POST":
                return self.update_endpoint(object_id, params)
            if object_id and method == "DELETE":
                self.delete_endpoint(object_id)
                return {"id": object_id, "object": "webhook_endpoint", "deleted": True}
        raise ApiError(
            404,
            f"Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs "
            "or we can help at https://support.stripe.com/.",
        )

    def _position(self, created: int) -> Position:
        self._made += 1
        return created, self._made

    def _list_events(self, params: dict[str, object]) -> dict[str, object]:
        known_only(params, LIST_EVENTS)
        if "type" in params and "types" in params:
            raise ApiError(400, "You may pass either `type` or `types`, but not both.")
        types = params.get("types")
        if isinstance(types, list) and len(types) > MAX_TYPES:
            raise ApiError(400, f"Invalid array: types can have at most {MAX_TYPES} items.")
        bounds = created_bounds(params.get("created"))
        success = boolean(params, "delivery_success")
        listed = [
            event
            for event in sorted(self.events.values(), key=lambda e: e.position, reverse=True)
            if self._within_horizon(event)
            and all(test(event.position[0], bound) for test, bound in bounds)
            and type_matches(str(event.record["type"]), params)
            and (success is None or success == (not self.pending(event)))
        ]
        page, has_more = cursor_window(
            listed, params, lambda event: event.position, self._event_position
        )
        return _list([self.render(event) for event in page], has_more, "/v1/events")

    def _within_horizon(self, event: Event) -> bool:
        return event.position[0] >= self._now() - HORIZON

    def _event(self, event_id: str) -> Event:
        event = self.events.get(event_id)
        if event is None or not self._within_horizon(event):
            raise ApiError(404, f"No such event: '{event_id}'", code="resource_missing", param="id")
        return event

    def _event_position(self, event_id: str, param: str) -> Position:
        """Where a cursor stands: any event that exists, past the horizon too (a page's
        last event may have aged out of it before the next page is asked for)."""
        event = self.events.get(event_id)
        if event is None:
            raise ApiError(
                400, f"No such event: '{event_id}'", code="resource_missing", param=param
            )
        return event.position

    def pending(self, event: Event) -> int:
        """Endpoints (not deleted) the event is for that have not answered it 2xx."""
        return len((event.targets & self.endpoints.keys()) - event.delivered)

    def render(self, event: Event) -> dict[str, object]:
        record = event.record
        fields = ("id", "object", "api_version", "created", "data", "livemode")
        return {
            **{name: record[name] for name in fields},
            "pending_webhooks": self.pending(event),
            "request": record["request"],
            "type": record["type"],
        }

    def _list_endpoints(self, params: dict[str, object]) -> dict[str, object]:
        known_only(params, LIST_ENDPOINTS)
        order = sorted(self._endpoint_positions.items(), key=lambda item: item[1], reverse=True)
        page, has_more = cursor_window(
            [endpoint_id for endpoint_id, _ in order],
            params,
            self._endpoint_positions.__getitem__,
            lambda endpoint_id, param: self._endpoint_positions[
                str(self._endpoint(endpoint_id, param)["id"])
            ],
        )
        endpoints = [dict(self.endpoints[endpoint_id]) for endpoint_id in page]
        return _list(endpoints, has_more, "/v1/webhook_endpoints")

    def _endpoint(self, endpoint_id: str, param: str) -> dict[str, object]:
        endpoint = self.endpoints.get(endpoint_id)
        if endpoint is None:
            raise ApiError(
                400 if param.endswith(("_after", "_before")) else 404,
                f"No such webhook endpoint: '{endpoint_id}'",
                code="resource_missing",
                param=param,
            )
        return endpoint

    def create_endpoint(self, params: Mapping[str, object]) -> dict[str, object]:
        known_only(params, CREATE_ENDPOINT)
        url = valid_url(required(params, "url"))
        enabled_events = enabled_events_of(required(params, "enabled_events"))
        endpoint_id = new_id("we_")
        endpoint: dict[str, object] = {
            "id": endpoint_id,
            "object": "webhook_endpoint",
            "api_version": params.get("api_version") or None,
            "application": None,
            "created": self._now(),
            "description": params.get("description") or None,
            "enabled_events": enabled_events,
            "livemode": False,
            "metadata": metadata_of(params.get("metadata")),
            "status": "enabled",
            "url": url,
        }
        self.endpoints[endpoint_id] = endpoint
        self._endpoint_positions[endpoint_id] = self._position(self._now())
        self.secrets[endpoint_id] = new_id("whsec_", 32)
        return {**endpoint, "secret": self.secrets[endpoint_id]}  # at creation only

    def update_endpoint(self, endpoint_id: str, params: Mapping[str, object]) -> dict[str, object]:
        known_only(params, UPDATE_ENDPOINT)
        changed = dict(self._endpoint(endpoint_id, "webhook_endpoint"))
        if params.get("url") is not None:
            changed["url"] = valid_url(params["url"])
        if params.get("enabled_events") is not None:
            changed["enabled_events"] = enabled_events_of(params["enabled_events"])
        if params.get("description") is not None:
            changed["description"] = str(params["description"]) or None
        if params.get("metadata") is not None:
            changed["metadata"] = metadata_of(params["metadata"])
        disabled = boolean(params, "disabled")
        if disabled is not None:
            changed["status"] = "disabled" if disabled else "enabled"
        self.endpoints[endpoint_id] = changed
        return dict(changed)

    def delete_endpoint(self, endpoint_id: str) -> None:
        self._endpoint(endpoint_id, "webhook_endpoint")
        del self.endpoints[endpoint_id], self._endpoint_positions[endpoint_id]


def _listens(endpoint: Mapping[str, object], event_type: str) -> bool:
    names = endpoint["enabled_events"]
    return isinstance(names, list) and ("*" in names or event_type in names)


def _list(data: list[dict[str, object]], has_more: bool, url: str) -> dict[str, object]:
    return {"object": "list", "data": data, "has_more": has_more, "url": url}
