"""Operations' tables: heartbeats (which relays and workers are alive, and what they last
did), hourly activity counts per endpoint, the audit log, console sign-ins, and failed
admin-token attempts per client address."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from hooklatch.db import Base, UTCDateTime


class Heartbeat(Base):
    """One row per running relay or worker process, written every few seconds.

    A process that stops beating is shown as silent by `hooklatch status`; retention
    deletes rows that have been silent for a day, so the table holds the processes of
    the last day at most.
    """

    __tablename__ = "heartbeats"

    # "<kind>/<hostname>/<pid>": one row per process, reused when a pid is.
    id: Mapped[str] = mapped_column(String(300), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    hostname: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
    # What the process reports of itself (a relay: its last cleanup pass).
    state: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class ConsoleSession(Base):
    """One sign-in to the console with the admin token. The cookie carries a random token;
    this row holds only its SHA-256. Every console request looks the row up: sign-out
    deletes it, and once expired it signs nobody in (retention then deletes it)."""

    __tablename__ = "console_sessions"

    token_sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    signed_in_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class TokenFailures(Base):
    """Failed admin-token attempts from one client address (an IPv6 one by its /64) in
    the current window, and the lockout they led to. Shared by every web process;
    retention deletes a row once its window and its lockout are over (``expires_at``)."""

    __tablename__ = "token_failures"

    address: Mapped[str] = mapped_column(String(64), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)
    window_started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    locked_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
