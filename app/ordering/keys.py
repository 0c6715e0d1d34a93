"""An event's ordering key and position, from its provider or the endpoint's own path."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from hooklatch.jsontypes import JSON
from hooklatch.providers.base import KeyedEvent, Provider, dotted, key_text, stored_key

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Incoming:
    """An event as ingest has it, for ``ordering_key`` and ``ordering_position``."""

    type: str
    payload: Any
    headers: Mapping[str, str]
    occurred_at: datetime | None


def key_by_path(payload: JSON, path: str) -> str | None:
    """The first of the comma-separated dotted paths that names an id in the payload."""
    for candidate in path.split(","):
        key = key_text(dotted(payload, candidate.strip()))
        if key is not None:
            return key
    return None


def ordering_key(provider: Provider, key_path: str | None, event: KeyedEvent) -> str | None:
    """The event's key: the endpoint's path if it has one, else the provider's. A plugin
    that raises is logged and gives no key: the event is kept, unordered, rather than
    refused for ever."""
    if key_path:
        return key_by_path(event.payload, key_path)
    try:
        return stored_key(provider.ordering_key(event))
    except Exception:
        log.exception("%s.ordering_key raised: the event is stored without a key", provider.name)
        return None


def ordering_position(provider: Provider, event: KeyedEvent) -> int | None:
    try:
        position = provider.ordering_position(event)
    except Exception:
        log.exception("%s.ordering_position raised: the event has no position", provider.name)
        return None
    if isinstance(position, bool) or not isinstance(position, int):
        return None
    return position if -(2**63) <= position < 2**63 else None
