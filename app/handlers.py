"""The public handler contract.

    from hooklatch import on

    @on("stripe", "invoice.paid")        # "*" and shell-style patterns match types
    def record_invoice(event, ctx):
        ctx.session.add(Invoice(id=event.payload["data"]["object"]["id"]))

A handler runs inside the transaction that marks the event processed: what it
writes through ``ctx.session`` commits with that mark or not at all. Pass
``ctx.idempotency_key`` to anything outside the database.

    @on("stripe", "customer.subscription.*", skip_stale=True)
    def save_subscription(event, ctx): ...

A handler with ``skip_stale=True`` does not run for an event older than the newest one of
its key already applied (``hooklatch.ordering.stale``); ``ctx.is_stale()`` asks the same
from inside a handler.

Two flags tell a handler that a sender's unsigned id or type may have been chosen by
someone else (docs/plugins.md, "Event ids"): ``event.repeats_event_id``, an earlier
event of the endpoint with this same body under another id or type, and
``event.conflicts_with_event_id``, an earlier event stored under this same id with
another body.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any, Protocol

from sqlalchemy.orm import Session


@dataclass(frozen=True)
class EventView:
    id: int
    endpoint_id: str
    provider: str
    type: str
    external_id: str
    payload: Any
    body: bytes
    headers: dict[str, str]
    received_at: datetime
    occurred_at: datetime | None
    # The first event of this endpoint with the same body under another id or type: a
    # replayed signed body, or a sender that sends one body under several types.
    repeats_event_id: int | None = None
    # The event first stored under this id, whose body differs: this delivery reused an
    # id that is not signed (a replayed signed body given a future event's id, or a
    # sender that reused an id). Its idempotency key differs from that event's.
    conflicts_with_event_id: int | None = None


class Guard(Protocol):
    """The stale guard (hooklatch.ordering.stale): its verdict, None where the event is
    not stale."""

    def check(self) -> object | None: ...


@dataclass(frozen=True)
class Context:
    session: Session
    idempotency_key: str
    attempt: int
    is_replay: bool
    log: logging.LoggerAdapter
    replay_id: int | None = None
    guard: Guard | None = field(default=None, repr=False)

    def is_stale(self) -> bool:
        """True when an event of this key with a newer provider time or sequence has
        been applied already: this one's state must not overwrite it. Asking opts this
        event in: once its handlers succeed, its position is the key's newest (if it is).
        Equal positions are not stale. An event without a key or position never is."""
        return self.guard is not None and self.guard.check() is not None


Handler = Callable[[EventView, Context], Any]


@dataclass
class Route:
    provider: str
    pattern: str
    handler: Handler
    # Not run for a stale event (hooklatch.ordering.stale).
    skip_stale: bool = False

    def matches(self, provider: str, event_type: str) -> bool:
        return fnmatchcase(provider, self.provider) and fnmatchcase(event_type, self.pattern)

    @property
    def name(self) -> str:
        return f"{self.handler.__module__}.{self.handler.__qualname__}"


@dataclass
class Router:
    routes: list[Route] = field(default_factory=list)

    def on(
        self, provider: str, event_type: str = "*", *, skip_stale: bool = False
    ) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append(Route(provider, event_type, handler, skip_stale=skip_stale))
            return handler

        return register

    def handlers_for(self, provider: str, event_type: str) -> list[Route]:
        return [route for route in self.routes if route.matches(provider, event_type)]


# Modules named in HOOKLATCH_HANDLERS register here when they are imported.
default_router = Router()
on = default_router.on
