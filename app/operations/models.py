"""The heartbeats table: which relays and workers are alive, and what they last did."""

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
