"""The audit log: every replay, bulk replay, endpoint and secret change, with who did it.

Entries are written in the transaction that makes the change, so there is no change
without its entry and no entry for a change rolled back. They never hold a secret: a
secret is named by its fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Integer, String, select
from sqlalchemy.orm import Mapped, Session, mapped_column

from hooklatch.db import Base, UTCDateTime, utcnow
from hooklatch.errors import BadRequest

ACTOR_LENGTH = 200
TARGET_LENGTH = 200


class AuditEntry(Base):
    """Who did what: every replay, bulk replay, endpoint and secret change."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(ACTOR_LENGTH))
    action: Mapped[str] = mapped_column(String(64))
    target: Mapped[str] = mapped_column(String(TARGET_LENGTH))
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)


# Characters of the reason a person gives for a replay, a bulk replay or a key's
# release, whichever face asks for it: a sentence for this log, not a document.
REASON_MAX = 1000


def check_reason(reason: str | None) -> None:
    """Refuses (``reason_too_long``) a reason longer than REASON_MAX: never cut short,
    so the log keeps what was said or nothing."""
    if reason is not None and len(reason) > REASON_MAX:
        raise BadRequest(f"a reason is at most {REASON_MAX:,} characters", reason="reason_too_long")


def record(
    session: Session,
    *,
    actor: str,
    action: str,
    target: str,
    now: datetime,
    details: dict[str, Any] | None = None,
) -> AuditEntry:
    entry = AuditEntry(
        at=now,
        actor=actor[:ACTOR_LENGTH],
        action=action,
        target=target[:TARGET_LENGTH],
        details=details,
    )
    session.add(entry)
    session.flush()
    return entry


def recent(session: Session, *, before: int | None = None, limit: int = 50) -> Sequence[AuditEntry]:
    """Newest first, ``limit`` entries older than entry ``before`` (keyset pages)."""
    query = select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit)
    if before is not None:
        query = query.where(AuditEntry.id < before)
    return session.scalars(query).all()


def describe(entry: AuditEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "target": entry.target,
        "details": entry.details or {},
    }
