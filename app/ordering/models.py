"""The ordering_keys table and the ordering policies."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime, utcnow

# Endpoint.ordering: events of one key run as they come (none), never two at once
# (serial), or one at a time in order, a failing one holding back the rest (fifo).
NONE = "none"
SERIAL = "serial"
FIFO = "fifo"
POLICIES = (NONE, SERIAL, FIFO)

# Endpoint.ordering_dead, under fifo: a dead event parks its key until someone acts
# (a replay that succeeds, or `hooklatch ordering release`), or releases it at once.
PARK = "park"
RELEASE = "release"
DEAD_POLICIES = (PARK, RELEASE)

# The longest hold window: events are held in the database, and a provider's
# out-of-order deliveries come seconds apart, not hours.
MAX_HOLD_SECONDS = 3600


class OrderingKey(Base):
    """What hooklatch remembers of one key of an endpoint: the newest position a handler
    applied (the stale guard) and the dead event that parks it, if any. Rows exist only
    for keys that used either."""

    __tablename__ = "ordering_keys"

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    applied_position: Mapped[int | None] = mapped_column(BigInteger)
    applied_event_id: Mapped[int | None] = mapped_column(BigInteger)
    # While this event is dead, the key's later events wait (fifo with ordering_dead=park).
    parked_event_id: Mapped[int | None] = mapped_column(
        ForeignKey("events.id", ondelete="SET NULL")
    )
    parked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
