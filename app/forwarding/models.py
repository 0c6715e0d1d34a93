"""The destinations and forwards tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime, partial_index, utcnow
from hooklatch.endpoints.models import ID_LENGTH, NAME_LENGTH
from hooklatch.events.models import BigId

# Forward.status: waiting to be sent (or sent again after a failure), acknowledged by the
# destination, or given up on after the last attempt (sent again only by a replay).
PENDING = "pending"
DELIVERED = "delivered"
DEAD = "dead"
STATUSES = (PENDING, DELIVERED, DEAD)


class Destination(Base):
    """A system behind hooklatch that processed events are forwarded to: its kind, its
    settings (the secret ones encrypted, as one JSON object), which events go there, its
    rate limit, whether it is paused, and the lease of the relay that sends to it."""

    __tablename__ = "destinations"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    kind: Mapped[str] = mapped_column(String(16))
    # The settings that are not secret (a subject, an exchange, a stream), as given.
    settings: Mapped[dict[str, str]] = mapped_column(JSON)
    # The secret settings (a URL with its password, a signing secret), Fernet-encrypted,
    # with a fingerprint to tell them apart and what every face shows of them.
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    fingerprint: Mapped[str] = mapped_column(String(12))
    shown: Mapped[str] = mapped_column(String(500))
    # Which events go there: all of one endpoint, or of one provider, or any; and of the
    # types that match one of ``types``' globs (none: every type).
    endpoint_id: Mapped[str | None] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), index=True
    )
    provider: Mapped[str | None] = mapped_column(String(64))
    types: Mapped[list[str]] = mapped_column(JSON)
    # Forwards a second at most (none: as fast as it takes them).
    rate_limit: Mapped[float | None] = mapped_column(Float)
    paused: Mapped[bool] = mapped_column(Boolean, server_default=false(), default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # One relay sends to a destination at a time (its order and rate limit are then one
    # process's), renewing this lease as it goes; a relay that dies gives it up when the
    # lease runs out.
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # What its senders did, added up as they go (status and the console read these, not
    # the forwards): forwards acknowledged, attempts that failed, and the last of each.
    delivered_total: Mapped[int] = mapped_column(BigInteger, server_default="0", default=0)
    failed_total: Mapped[int] = mapped_column(BigInteger, server_default="0", default=0)
    last_delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_failed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)


class Forward(Base):
    """One event to send to one destination: written in the transaction that processed
    the event, kept until the event goes (retention), so that it can be sent again."""

    __tablename__ = "forwards"
    __table_args__ = (
        UniqueConstraint("event_id", "destination_id"),
        # The forwarder's poll: a destination's pending forwards, oldest first.
        partial_index("ix_forwards_pending", "destination_id", "id", where="status = 'pending'"),
        # A key's forwards not delivered yet, in their order: a keyed forward waits behind
        # an earlier one of its key that failed and is not due yet, or is dead.
        partial_index(
            "ix_forwards_keyed",
            "destination_id",
            "ordering_key",
            "id",
            where="ordering_key IS NOT NULL AND status != 'delivered'",
        ),
        partial_index("ix_forwards_dead", "destination_id", "id", where="status = 'dead'"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    destination_id: Mapped[str] = mapped_column(ForeignKey("destinations.id", ondelete="CASCADE"))
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"), index=True)
    # The event's ordering key on a serial or fifo endpoint: a key's forwards are sent in
    # their order, one after the other.
    ordering_key: Mapped[str | None] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16), default=PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    # When it was queued (written as its event's processing committed, or replayed) and
    # when the destination last acknowledged it.
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
