"""An endpoint's ordering settings, the keys that are blocked, and releasing a parked key.
Functions take the session first and never commit."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import Connection, Select, Subquery, func, select
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import DEAD_POLICIES, FIFO, MAX_HOLD_SECONDS, POLICIES
from hooklatch.endpoints.serialize import ordering_of
from hooklatch.errors import BadRequest, NotFound
from hooklatch.events.models import DEAD, PENDING, Attempt, Event
from hooklatch.jsontypes import JSONObject
from hooklatch.ordering import claims
from hooklatch.ordering.claims import KeyRef
from hooklatch.ordering.models import OrderingKey

# A key path: dotted names into the payload, several separated by commas.
KEY_PATH = re.compile(
    r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*(\s*,\s*[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*)*"
)


def describe_ordering(endpoint: Endpoint) -> JSONObject:
    """The settings as the CLI, the API and the console show them."""
    return {
        "endpoint_id": endpoint.id,
        "name": endpoint.name,
        **ordering_of(endpoint),
        "revision": endpoint.revision,
    }


class OrderingChanges(TypedDict, total=False):
    """Settings to change (``set_ordering``): one left out, or None, stays as it is."""

    policy: str | None
    dead: str | None
    hold_seconds: int | None
    key_path: str | None  # "": the provider's key again


def set_ordering(
    session: Session,
    endpoint: Endpoint,
    *,
    actor: str,
    now: datetime,
    policy: str | None = None,
    dead: str | None = None,
    hold_seconds: int | None = None,
    key_path: str | None = None,
) -> bool:
    """Change what is given (``key_path=""`` goes back to the provider's key), audited;
    whether anything changed. Events stored from now on are keyed by the new settings;
    those waiting behind a key that is no longer fifo are queued by the relay's next
    sweep."""
    before = ordering_of(endpoint)
    after: dict[str, Any] = {
        "policy": before["policy"] if policy is None else policy,
        "dead": before["dead"] if dead is None else dead,
        "hold_seconds": before["hold_seconds"] if hold_seconds is None else hold_seconds,
        "key_path": before["key_path"] if key_path is None else (key_path.strip() or None),
    }
    _check(after)
    if after == before:
        return False
    endpoint.ordering, endpoint.ordering_dead = after["policy"], after["dead"]
    endpoint.hold_seconds, endpoint.ordering_key_path = after["hold_seconds"], after["key_path"]
    endpoint.revision += 1
    audit.record(
        session,
        actor=actor,
        action="endpoint_ordering",
        target=f"endpoint {endpoint.id}",
        now=now,
        details={"before": before, "after": after},
    )
    return True


def _check(settings: dict[str, Any]) -> None:
    if settings["policy"] not in POLICIES:
        raise BadRequest(f"ordering must be one of {', '.join(POLICIES)}", reason="bad_ordering")
    if settings["dead"] not in DEAD_POLICIES:
        raise BadRequest(
            f"a dead event must {' or '.join(DEAD_POLICIES)} its key", reason="bad_ordering"
        )
    hold = settings["hold_seconds"]
    if not 0 <= hold <= MAX_HOLD_SECONDS:
        raise BadRequest(
            f"the hold window is 0 to {MAX_HOLD_SECONDS} seconds", reason="bad_ordering"
        )
    if hold and settings["policy"] != FIFO:
        raise BadRequest(
            "a hold window orders a key's events, so it needs ordering fifo",
            reason="bad_ordering",
        )
    path = settings["key_path"]
    if path is not None and (len(path) > 255 or not KEY_PATH.fullmatch(path)):
        raise BadRequest(
            "a key path is dotted names into the payload (data.object.customer), several "
            "separated by commas",
            reason="bad_ordering",
        )


@dataclass(frozen=True)
class BlockedKey:
    """A fifo key whose next event cannot run: parked by a dead event, or failing."""

    endpoint_id: str
    key: str
    event_id: int  # the event holding it
    why: str
    since: datetime | None
    waiting: int  # events behind it

    def as_json(self) -> JSONObject:
        data = asdict(self)
        data["since"] = self.since.isoformat() if self.since else None
        return data


def blocked_keys(session: Session, *, limit: int = 100) -> list[BlockedKey]:
    """Parked keys, then keys whose first event is failing, longest blocked first."""
    found = _parked(session, limit) + _failing(session, limit)
    found.sort(key=lambda b: (b.since is None, b.since or datetime.min))
    return found[:limit]


def blocked_page(session: Session, *, limit: int) -> tuple[list[BlockedKey], int]:
    """``blocked_keys``, and how many keys are blocked in all (counted again only when
    there are more than the page shows)."""
    found = blocked_keys(session, limit=limit)
    return found, count_blocked(session) if len(found) == limit else len(found)


def _parked(session: Session, limit: int) -> list[BlockedKey]:
    rows = session.execute(_parked_rows().order_by(OrderingKey.parked_at).limit(limit)).all()
    return [
        BlockedKey(
            row.endpoint_id,
            row.key,
            row.parked_event_id,
            f"dead, parking its key until a replay succeeds or the key is released: "
            f"{row.last_error or 'no error recorded'}",
            row.parked_at,
            _waiting(session, KeyRef(row.endpoint_id, row.key), row.parked_event_id),
        )
        for row in rows
    ]


def _heads() -> Subquery:
    """Each fifo key's first pending event (rank 1), as a subquery."""
    return (
        select(
            Event.id,
            Event.endpoint_id,
            Event.ordering_key,
            Event.attempts,
            Event.next_attempt_at,
            Event.last_error,
            func.row_number()
            .over(
                partition_by=(Event.endpoint_id, Event.ordering_key),
                order_by=(Event.ordering_position, Event.id),
            )
            .label("rank"),
        )
        .join(Endpoint, Endpoint.id == Event.endpoint_id)
        .where(Event.ordering_key.is_not(None), Event.status == PENDING, Endpoint.ordering == FIFO)
        .subquery()
    )


def _parked_rows() -> Select[str, str, int | None, datetime | None, str | None]:
    return (
        select(
            OrderingKey.endpoint_id,
            OrderingKey.key,
            OrderingKey.parked_event_id,
            OrderingKey.parked_at,
            Event.last_error,
        )
        .join(Event, Event.id == OrderingKey.parked_event_id)
        .where(Event.status == DEAD)
    )


def count_blocked(connection: Connection | Session) -> int:
    """How many keys are blocked (the metrics gauge): parked, or with a failing head."""
    heads = _heads()
    failing = select(func.count()).where(heads.c.rank == 1, heads.c.attempts > 0)
    parked = select(func.count()).select_from(_parked_rows().subquery())
    return int(connection.scalar(failing) or 0) + int(connection.scalar(parked) or 0)


def _failing(session: Session, limit: int) -> list[BlockedKey]:
    ranked = _heads()
    first_failure = (
        select(func.min(Attempt.finished_at))
        .where(Attempt.event_id == ranked.c.id, Attempt.outcome == "failed")
        .scalar_subquery()
    )
    rows = session.execute(
        select(ranked, first_failure.label("since"))
        .where(ranked.c.rank == 1, ranked.c.attempts > 0)
        .limit(limit)
    ).all()
    return [
        BlockedKey(
            row.endpoint_id,
            row.ordering_key,
            row.id,
            f"failing: attempt {row.attempts} failed, next at "
            f"{row.next_attempt_at.isoformat() if row.next_attempt_at else 'unknown'}: "
            f"{row.last_error or 'no error recorded'}",
            row.since,
            _waiting(session, KeyRef(row.endpoint_id, row.ordering_key), row.id),
        )
        for row in rows
    ]


def _waiting(session: Session, ref: KeyRef, holder: int) -> int:
    """How many of the key's pending events wait behind the one holding it."""
    pending = session.scalar(
        select(func.count()).where(
            Event.endpoint_id == ref.endpoint_id,
            Event.ordering_key == ref.key,
            Event.status == PENDING,
            Event.id != holder,
        )
    )
    return int(pending or 0)


def release_key(
    session: Session, endpoint: Endpoint, key: str, *, actor: str, reason: str, now: datetime
) -> JSONObject:
    """Let a key parked by a dead event go on: its next event is handed out at once. The
    dead event stays dead (replay it to run it again)."""
    if not reason.strip():
        raise BadRequest("say why the key is released", reason="reason_required")
    audit.check_reason(reason)
    ref = KeyRef(endpoint.id, key)
    parked = claims.release(session, ref, now=now)
    if parked is None:
        raise NotFound(f"key {key!r} of endpoint {endpoint.id} is not parked", reason="not_parked")
    audit.record(
        session,
        actor=actor,
        action="key_released",
        target=f"endpoint {endpoint.id}",
        now=now,
        details={"key": key, "dead_event": parked, "reason": reason},
    )
    return {"endpoint_id": endpoint.id, "key": key, "dead_event": parked}
