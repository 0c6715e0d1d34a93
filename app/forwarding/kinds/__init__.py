"""The kinds of destination a forward goes to, by name: each checks its settings and opens
publishers (``base``); one module per kind."""

from __future__ import annotations

from hooklatch.forwarding.kinds.base import Kind
from hooklatch.forwarding.kinds.http import HttpKind
from hooklatch.forwarding.kinds.nats import NatsKind
from hooklatch.forwarding.kinds.rabbitmq import RabbitKind
from hooklatch.forwarding.kinds.redis_streams import RedisStreamKind

KINDS: dict[str, Kind] = {
    kind.name: kind for kind in (HttpKind(), NatsKind(), RabbitKind(), RedisStreamKind())
}


def kind(name: str) -> Kind:
    """The kind called ``name``; ValueError names the kinds there are."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(
            f"no kind of destination is called {name!r} (there are {', '.join(KINDS)})"
        ) from None
