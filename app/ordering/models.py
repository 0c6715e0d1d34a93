"""The ordering_keys table."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime, utcnow


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
