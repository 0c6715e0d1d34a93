"""What one request brings to each of its events, and where each event takes its place
among its key's (hooklatch.ordering): the inputs of storing (hooklatch.ingest.store)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from hooklatch.endpoints.service import ActiveEndpoint
from hooklatch.ordering.placement import Placement, place_event, utc
from hooklatch.providers.base import IncomingEvent, Provider


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


def placement(delivered: Delivered, item: IncomingEvent) -> Placement:
    """Where the event of this delivery takes its place among its key's."""
    return place_event(
        delivered.endpoint.ordering,
        delivered.provider,
        item,
        headers=delivered.headers,
        body=delivered.body,
        now=delivered.now,
    )


__all__ = ["NO_CONFLICT", "Conflict", "Delivered", "Placement", "placement", "utc"]
