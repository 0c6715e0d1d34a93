"""What one request brings to each of its events, and where each event takes its place
among its key's (hooklatch.ordering): the inputs of storing (hooklatch.ingest.store)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hooklatch.endpoints.service import ActiveEndpoint
from hooklatch.ordering.keys import Incoming, ordering_key, ordering_position
from hooklatch.providers.base import IncomingEvent, Provider, position_of


@dataclass(frozen=True)
class Delivered:
    """What one request brings to each of its events."""

    endpoint: ActiveEndpoint
    provider: Provider
    headers: dict[str, str]  # as stored: no credentials
    body: bytes
    digest: str
    # A request with several events gives them all its body: only a lone event is
    # compared with the bodies already stored.
    compare_body: bool
    now: datetime

    def keeps_apart(self, item: IncomingEvent) -> bool:
        """Whether a stored event under this id with another body makes this one a
        conflict of its own. Not where the signature covers the id: only the provider can
        then send another body under it (a re-send whose body changed). Not for a request
        with several events: each gets the request's body, and a re-send may batch them
        otherwise."""
        return self.compare_body and not item.id_signed


@dataclass(frozen=True)
class Conflict:
    """A delivery that repeats a stored event's id with another body, stored apart; or,
    as ``NO_CONFLICT``, any other delivery."""

    event_id: int | None = None  # the event first stored under the id
    variant: str = ""  # this delivery's body digest: its retries are its duplicates


NO_CONFLICT = Conflict()


@dataclass(frozen=True)
class Placement:
    """Where an event stands among its key's (hooklatch.ordering), and when it is due."""

    key: str | None
    position: int | None
    due_at: datetime


def placement(delivered: Delivered, item: IncomingEvent) -> Placement:
    """Unordered endpoints pay nothing here. A keyed event under a hold window is due
    once the window has passed, and takes its place by the provider's time (else the time
    received); otherwise it is due at once, in arrival order."""
    settings, now = delivered.endpoint.ordering, delivered.now
    if not settings.keyed:
        return Placement(None, None, now)
    provider = delivered.provider
    event = Incoming(
        type=item.type,
        payload=provider.payload(delivered.headers, delivered.body),
        headers=delivered.headers,
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
