"""The endpoints and endpoint_secrets tables."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, BigInteger, Boolean, ForeignKey, Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from hooklatch.db import Base, UTCDateTime, utcnow

ID_LENGTH = 40  # "ep_" and 20 hex digits, as create_endpoint makes them
NAME_LENGTH = 200


class Endpoint(Base):
    """A URL given to one provider: /hooks/<id>."""

    __tablename__ = "endpoints"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    provider: Mapped[str] = mapped_column(String(64))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The provider's options for this endpoint (Provider.options), validated at creation.
    options: Mapped[dict[str, str] | None] = mapped_column(JSON)
    # How events of one key (Provider.ordering_key) run: none, serial or fifo
    # (hooklatch.ordering). Under fifo, whether a dead event parks its key or releases it,
    # and how long keyed events are held to be run in provider-time order.
    ordering: Mapped[str] = mapped_column(String(8), server_default="none")
    ordering_dead: Mapped[str] = mapped_column(String(8), server_default="park")
    hold_seconds: Mapped[int] = mapped_column(Integer, server_default="0")
    # A dotted path into the payload that replaces the provider's key (data.object.customer).
    ordering_key_path: Mapped[str | None] = mapped_column(String(255))
    # Bumped by every change to the ordering settings: storing an event checks it, so a web
    # process's cached copy of the endpoint never keys events by settings that changed.
    revision: Mapped[int] = mapped_column(Integer, server_default="0")

    secrets: Mapped[list[EndpointSecret]] = relationship(
        back_populates="endpoint",
        cascade="all, delete-orphan",
        order_by="EndpointSecret.id",
        lazy="selectin",
    )


class EndpointSecret(Base):
    """One active signing secret, encrypted; an endpoint may have several (rotation)."""

    __tablename__ = "endpoint_secrets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), index=True
    )
    ciphertext: Mapped[bytes] = mapped_column(LargeBinary)
    # 12 hex digits of an HMAC of the secret under a key derived from the first
    # HOOKLATCH_SECRET_KEYS key (SecretBox.fingerprint): tells secrets apart, and a dump
    # of the table alone cannot be used to guess them.
    fingerprint: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When this secret last verified a delivery alone (written in batches, a few seconds
    # late at most): during a rotation, the old one stops being used here.
    last_verified_at: Mapped[datetime | None] = mapped_column(UTCDateTime)

    endpoint: Mapped[Endpoint] = relationship(back_populates="secrets")


class Refusal(Base):
    """How many deliveries to an endpoint were refused, by reason: "every delivery
    suddenly fails" after a secret rotation shows here at once."""

    __tablename__ = "refusals"

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    reason: Mapped[str] = mapped_column(String(64), primary_key=True)
    # 64-bit: a flood of 1,000 refusals a second passes 2**31 in 25 days.
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    first_at: Mapped[datetime] = mapped_column(UTCDateTime)
    last_at: Mapped[datetime] = mapped_column(UTCDateTime)
