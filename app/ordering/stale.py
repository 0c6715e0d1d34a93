"""The stale-event guard: is this event older than the newest one applied for its key?

Per (endpoint, key), ``ordering_keys.applied_position`` holds the newest position
(``Provider.ordering_position``: the provider's time or sequence) of an event whose
handlers consulted the guard and ran. An event whose position is older is stale; an
equal one is not (Stripe's times are whole seconds, and two events of one second are
told apart by nothing the provider sends). An event without a key or a position is never
stale. Handlers opt in, with ``@on(..., skip_stale=True)`` or ``ctx.is_stale()``.

Under ``serial`` or ``fifo`` the check and the write happen under the key's lock, so two
events of a key can never both pass it against the same newest position. Under ``none``
two events of a key handled at the same moment may both pass: the newest position still
wins the write, but each handler ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from hooklatch.endpoints.models import Endpoint
from hooklatch.ordering.keys import ordering_key, ordering_position
from hooklatch.ordering.models import OrderingKey

if TYPE_CHECKING:
    from hooklatch.handlers import EventView
    from hooklatch.providers.base import Provider


@dataclass(frozen=True)
class Staleness:
    key: str
    position: int
    applied_position: int
    applied_event_id: int | None

    @property
    def reason(self) -> str:
        return (
            f"stale: position {self.position} of key {self.key!r} is older than "
            f"{self.applied_position}, applied by event {self.applied_event_id}"
        )


@dataclass
class StaleGuard:
    """One event's guard, built by the worker for each run of its handlers; it reads the
    key's newest position the first time it is asked, and only then."""

    session: Session
    provider: Provider
    event: EventView
    stored_key: str | None
    now: datetime
    asked: bool = False
    _verdict: Staleness | None = field(default=None, init=False)
    _place: tuple[str, int] | None = field(default=None, init=False)

    def check(self) -> Staleness | None:
        if self.asked:
            return self._verdict
        self.asked = True
        key = self.stored_key or ordering_key(self.provider, self._key_path(), self.event)
        position = ordering_position(self.provider, self.event) if key else None
        if key is None or position is None:
            return None
        self._place = (key, position)
        applied = self.session.execute(
            select(OrderingKey.applied_position, OrderingKey.applied_event_id).where(
                OrderingKey.endpoint_id == self.event.endpoint_id, OrderingKey.key == key
            )
        ).first()
        if applied is not None and applied[0] is not None and position < applied[0]:
            self._verdict = Staleness(key, position, applied[0], applied[1])
        return self._verdict

    def applied(self) -> None:
        """The handlers ran: their event's position is now the key's newest, unless a newer
        one is there already."""
        if self._place is None or self._verdict is not None:
            return
        key, position = self._place
        _record(self.session, self.event.endpoint_id, key, position, self.event.id, self.now)

    def _key_path(self) -> str | None:
        return self.session.scalar(
            select(Endpoint.ordering_key_path).where(Endpoint.id == self.event.endpoint_id)
        )


def _record(
    session: Session, endpoint_id: str, key: str, position: int, event_id: int, now: datetime
) -> None:
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    statement = insert(OrderingKey).values(
        endpoint_id=endpoint_id,
        key=key,
        applied_position=position,
        applied_event_id=event_id,
        updated_at=now,
    )
    newer: Any = statement.excluded.applied_position >= func.coalesce(
        OrderingKey.applied_position, statement.excluded.applied_position
    )
    session.execute(
        statement.on_conflict_do_update(
            index_elements=[OrderingKey.endpoint_id, OrderingKey.key],
            set_={
                "applied_position": case(
                    (newer, statement.excluded.applied_position),
                    else_=OrderingKey.applied_position,
                ),
                "applied_event_id": case(
                    (newer, statement.excluded.applied_event_id),
                    else_=OrderingKey.applied_event_id,
                ),
                "updated_at": now,
            },
        )
    )
