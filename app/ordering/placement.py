"""Where an event takes its place among its key's, and when it is due: the same for a
delivery (hooklatch.ingest) and an event fetched from the provider's API
(hooklatch.reconcile)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hooklatch.endpoints.ordering import OrderingSettings
from hooklatch.ordering.keys import Incoming, ordering_key, ordering_position
from hooklatch.providers.base import IncomingEvent, Provider, position_of


@dataclass(frozen=True)
class Placement:
    """Where an event stands among its key's (hooklatch.ordering), and when it is due."""

    key: str | None
    position: int | None
    due_at: datetime


def place_event(
    settings: OrderingSettings,
    provider: Provider,
    item: IncomingEvent,
    *,
    headers: Mapping[str, str],
    body: bytes,
    now: datetime,
) -> Placement:
    """Unordered endpoints pay nothing here. A keyed event under a hold window is due
    once the window has passed, and takes its place by the provider's time (else the time
    received); otherwise it is due at once, in arrival order."""
    if not settings.keyed:
        return Placement(None, None, now)
    event = Incoming(
        type=item.type,
        payload=provider.payload(headers, body),
        headers=headers,
        occurred_at=utc(item.occurred_at),
    )
    key = ordering_key(provider, settings.key_path, event)
    if key is None:
        return Placement(None, None, now)
    if not settings.holds:
        return Placement(key, 0, now)
    position = ordering_position(provider, event)
    if position is None:
        position = position_of(now)
    return Placement(key, position, now + timedelta(seconds=settings.hold_seconds))


def utc(value: datetime | None) -> datetime | None:
    """A plugin's naive datetime is taken as UTC (docs/plugins.md), never as local time."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
