"""The events, outbox, attempts and replays tables."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime, partial_index, utcnow

# BIGINT ids on servers; SQLite only auto-increments INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer, "sqlite")


# Event.origin and Event.verified_by: a delivery the provider sent, verified by its
# signature; or an event fetched from the provider's API by a reconcile run, verified by
# the authenticated call that fetched it (hooklatch.reconcile).
WEBHOOK = "webhook"
API = "api"
SIGNATURE = "signature"
API_CALL = "api_call"

PENDING = "pending"
PROCESSED = "processed"
IGNORED = "ignored"
DEAD = "dead"
STATUSES = (PENDING, PROCESSED, IGNORED, DEAD)


class Event(Base):
    """One provider event, stored once per (endpoint, external id).

    The row doubles as the dedupe key: `body` and `headers` may be pruned for
    storage while the key stays, so a late retry is still recognised.
    """

    __tablename__ = "events"
    __table_args__ = (
        # The dedupe key: one event per id and endpoint, and one per differing body where
        # the id is not signed (``variant``).
        UniqueConstraint("endpoint_id", "external_id", "variant"),
        Index("ix_events_status_next_attempt_at", "status", "next_attempt_at"),
        # Ingest looks up an earlier event with the same body (repeats_event_id). A hash
        # index: a quarter of the size of a B-tree on (endpoint_id, body_sha256), and a
        # third or less of its write-ahead log per event (docs/benchmarks.md).
        Index("ix_events_body_sha256", "body_sha256", postgresql_using="hash"),
        # Retention's payload pass: processed and ignored events that still hold their body,
        # oldest first. A row enters it when a worker finishes the event (ingest writes
        # pending rows: no entry, no cost) and leaves it when its payload is pruned.
        partial_index(
            "ix_events_prunable",
            "received_at",
            where="body IS NOT NULL AND status IN ('processed', 'ignored')",
        ),
        # The console's list of dead events, newest first, at any table size: only dead
        # rows are in it, so it costs nothing to events that never die.
        partial_index("ix_events_dead", "id", where="status = 'dead'"),
        # A key's pending events in the order they run (hooklatch.ordering): only keyed
        # pending rows are in it, so unkeyed traffic never touches it.
        partial_index(
            "ix_events_ordering",
            "endpoint_id",
            "ordering_key",
            "ordering_position",
            "id",
            where="ordering_key IS NOT NULL AND status = 'pending'",
        ),
        # The events that repeat an earlier body, counted by endpoint.
        partial_index(
            "ix_events_repeated_bodies", "endpoint_id", where="repeats_event_id IS NOT NULL"
        ),
        # The conflicting deliveries, counted by endpoint.
        partial_index(
            "ix_events_conflicts", "endpoint_id", where="conflicts_with_event_id IS NOT NULL"
        ),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(64))
    external_id: Mapped[str] = mapped_column(String(255))
    type: Mapped[str] = mapped_column(String(255))
    occurred_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    status: Mapped[str] = mapped_column(String(16), default=PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    processed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    headers: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    body_sha256: Mapped[str] = mapped_column(String(64))
    # Deliveries that reused this event id with a different body: a bug or an attack.
    mismatched_duplicates: Mapped[int] = mapped_column(Integer, default=0)
    # The first event of this endpoint with the same body, stored under another id or
    # type: a replay of a signed body whose id and type are not signed, or a sender that
    # sends one body under several types (Shopify). Both rows go with their endpoint.
    repeats_event_id: Mapped[int | None] = mapped_column(BigInteger)
    # Empty for the first event stored under its id. A later delivery of that id with
    # another body, where the provider does not sign the id, is stored as an event of
    # its own (a conflict): its body's SHA-256 here keeps it apart, and dedupes its own
    # retries, and ``conflicts_with_event_id`` names the first event.
    variant: Mapped[str] = mapped_column(String(64), server_default="", default="")
    conflicts_with_event_id: Mapped[int | None] = mapped_column(BigInteger)
    # The entity this event changes, set at ingest when its endpoint's ordering is serial
    # or fifo, and the place it takes among that key's events: 0 without a hold window,
    # the provider's time (else the time received) with one. A key's events run in
    # (ordering_position, id) order.
    ordering_key: Mapped[str | None] = mapped_column(String(255))
    ordering_position: Mapped[int | None] = mapped_column(BigInteger)
    # How the event reached hooklatch, and how it was verified (WEBHOOK and SIGNATURE, or
    # API and API_CALL).
    origin: Mapped[str] = mapped_column(String(8), server_default=WEBHOOK, default=WEBHOOK)
    verified_by: Mapped[str] = mapped_column(
        String(16), server_default=SIGNATURE, default=SIGNATURE
    )


class OutboxEntry(Base):
    """Work in hand, written in the transaction that stored the event.

    The relay hands it to a job (``job_id``); the worker deletes it in the transaction
    that records the event's attempt. A row whose job is gone is handed out again.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        # The relay's poll: rows not handed to a job yet, oldest first.
        partial_index("ix_outbox_undispatched", "id", where="job_id IS NULL"),
        # The relay's poll for the replay queue: replays' rows not handed out yet. Through
        # the index above it would walk every live row waiting (an outage's backlog) to
        # find the few replays behind them.
        partial_index(
            "ix_outbox_replays_undispatched", "id", where="job_id IS NULL AND replay_id IS NOT NULL"
        ),
        # Rows are found by a replay, never by its absence: NULLs (every row that is not a
        # replay) left in this index let a planner without statistics pair it with the
        # event_id index and read every outbox row for each pending event.
        partial_index("ix_outbox_replay_id", "replay_id", where="replay_id IS NOT NULL"),
        # The relay's polls of the live lane and of the events a reconcile fetched, which
        # workers read after it: each from its own index, since a catch-up leaves
        # thousands of fetched rows waiting, and live ones keep coming behind them.
        partial_index(
            "ix_outbox_live_undispatched",
            "id",
            where="job_id IS NULL AND replay_id IS NULL AND NOT fetched",
        ),
        partial_index("ix_outbox_fetched_undispatched", "id", where="job_id IS NULL AND fetched"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"), index=True)
    replay_id: Mapped[int | None] = mapped_column(ForeignKey("replays.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    job_id: Mapped[str | None] = mapped_column(String(64))
    dispatched_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Jobs that took this row and vanished without finishing it (the process died in a
    # handler?): the row is then handed out alone, and past a limit its event is dead.
    lost_dispatches: Mapped[int] = mapped_column(Integer, server_default="0")
    # The row of an event a reconcile fetched from the provider's API: handed out in the
    # fetched lane, behind live events (hooklatch.jobs).
    fetched: Mapped[bool] = mapped_column(Boolean, server_default=false())


class BulkReplay(Base):
    """A bulk replay: the events a filter matched when it was planned (its items),
    replayed oldest first at a limited rate by the relays, each at most once."""

    __tablename__ = "replay_batches"

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    requested_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str] = mapped_column(Text)
    # The filter as given (EventFilter.as_dict), for the record.
    filter: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The newest event id when it was planned: nothing stored later is in it.
    watermark: Mapped[int] = mapped_column(BigInteger)
    matched: Mapped[int] = mapped_column(Integer)
    replayed: Mapped[int] = mapped_column(Integer, default=0)
    # Events that succeeded since the bulk replay was planned, or whose payload was pruned.
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    # Replays requested per second, at most, whichever relays advance it.
    rate: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="running", index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # When a relay last advanced it: the next step takes rate times the time since.
    advanced_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class BulkReplayItem(Base):
    """One event of a bulk replay, written when it is planned: the set is frozen then. An item
    is claimed (``FOR UPDATE SKIP LOCKED``) and given its outcome in the transaction
    that requests its replay, so no relay replays it twice."""

    __tablename__ = "replay_batch_items"

    batch_id: Mapped[int] = mapped_column(
        ForeignKey("replay_batches.id", ondelete="CASCADE"), primary_key=True
    )
    event_id: Mapped[int] = mapped_column(
        ForeignKey("events.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    # None while waiting; "replayed", or "skipped" (succeeded since, or payload pruned).
    outcome: Mapped[str | None] = mapped_column(String(16))


class Replay(Base):
    """An explicit request to run an event's handlers again, with who asked and why."""

    __tablename__ = "replays"
    __table_args__ = (
        # One replay per event and bulk replay, whatever happens to the relay advancing it.
        UniqueConstraint("batch_id", "event_id"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"), index=True)
    batch_id: Mapped[int | None] = mapped_column(
        ForeignKey("replay_batches.id", ondelete="SET NULL")
    )
    requested_by: Mapped[str] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # pending; once run succeeded, failed or stale; or cancelled with its bulk replay
    # before any worker started it.
    # pending, then succeeded, failed, stale, skipped (its event ran since) or cancelled.
    status: Mapped[str] = mapped_column(String(16), default=PENDING, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    error: Mapped[str | None] = mapped_column(Text)
    # The event's newest attempt when this was asked for: an attempt after it that
    # processed the event (a provider's retry re-armed it) makes this one skipped.
    after_attempt_id: Mapped[int | None] = mapped_column(BigInteger)


class Attempt(Base):
    """One run of an event's handlers: a delivery attempt or a replay."""

    __tablename__ = "attempts"
    __table_args__ = (
        # Deleting a replay (with its event, by retention) sets its attempts' replay_id to
        # NULL: without this index, PostgreSQL scans every attempt for each replay deleted.
        partial_index("ix_attempts_replay_id", "replay_id", where="replay_id IS NOT NULL"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    event_id: Mapped[int] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"), index=True)
    replay_id: Mapped[int | None] = mapped_column(ForeignKey("replays.id", ondelete="SET NULL"))
    number: Mapped[int] = mapped_column(Integer)
    outcome: Mapped[str] = mapped_column(String(16))
    handlers: Mapped[str] = mapped_column(Text, default="")
    error: Mapped[str | None] = mapped_column(Text)
    # The handler's traceback when it raised (bounded), for the console.
    traceback: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
