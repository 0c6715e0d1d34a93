"""The public handler contract.

    from hooklatch import on

    @on("stripe", "invoice.paid")        # "*" and shell-style patterns match types
    def record_invoice(event, ctx):
        ctx.session.add(Invoice(id=event.payload["data"]["object"]["id"]))

A handler runs inside the transaction that marks the event processed: what it
writes through ``ctx.session`` commits with that mark or not at all. Pass
``ctx.idempotency_key`` to anything outside the database.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Any

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


@dataclass(frozen=True)
class Context:
    session: Session
    idempotency_key: str
    attempt: int
    is_replay: bool
    log: logging.LoggerAdapter
    replay_id: int | None = None


Handler = Callable[[EventView, Context], Any]


@dataclass
class Route:
    provider: str
    pattern: str
    handler: Handler

    def matches(self, provider: str, event_type: str) -> bool:
        return fnmatchcase(provider, self.provider) and fnmatchcase(event_type, self.pattern)

    @property
    def name(self) -> str:
        return f"{self.handler.__module__}.{self.handler.__qualname__}"


@dataclass
class Router:
    routes: list[Route] = field(default_factory=list)

    def on(self, provider: str, event_type: str = "*") -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            self.routes.append(Route(provider, event_type, handler))
            return handler

        return register

    def handlers_for(self, provider: str, event_type: str) -> list[Route]:
        return [route for route in self.routes if route.matches(provider, event_type)]


# Modules named in HOOKLATCH_HANDLERS register here when they are imported.
default_router = Router()
on = default_router.on


class HandlerImportError(RuntimeError):
    pass


def import_handler_modules(modules: Iterable[str]) -> None:
    from hooklatch.renamed import hint

    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise HandlerImportError(
                f"HOOKLATCH_HANDLERS: module {module!r} failed to import: {exc}{hint(exc)}"
            ) from exc
