"""The audit log: every replay, bulk replay, endpoint and secret change, with who did it.

Entries are written in the transaction that makes the change, so there is no change
without its entry and no entry for a change rolled back. They never hold a secret: a
secret is named by its fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.errors import BadRequest
from hooklatch.operations.models import AuditEntry

ACTOR_LENGTH = 200
TARGET_LENGTH = 200
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
