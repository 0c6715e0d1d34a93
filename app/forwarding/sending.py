"""Sending a destination's forwards: the lease that lets one relay send to it at a time,
the forwards due (oldest first, a key's behind any of its own that is waiting), their
sending in order, and what each outcome leaves: delivered, or tried again after a pause
that grows, or dead after the last attempt. Functions that take a session never commit.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple, cast

from sqlalchemy import Table, and_, bindparam, exists, or_, select, update
from sqlalchemy.orm import Session, aliased

from hooklatch.crypto import SecretBox
from hooklatch.db import backoff
from hooklatch.events.identity import idempotency_key
from hooklatch.events.models import Event
from hooklatch.forwarding.kinds.base import Connection, Outcome, Publisher
from hooklatch.forwarding.message import Message
from hooklatch.forwarding.models import DEAD, DELIVERED, PENDING, Destination, Forward

log = logging.getLogger(__name__)

# The most forwards one pass of a destination's sender takes: as many as a publisher
# that sends a whole call together takes at once, and at least PASS_MIN for those that
# send a few at a time (each pass reads and writes the database once).
BATCH = 1000
PASS_MIN = 200


def pass_size(at_once: int) -> int:
    """How many forwards a pass takes, for a publisher that sends ``at_once`` together:
    bounded, so that what a relay killed mid-pass leaves unrecorded stays small."""
    return max(PASS_MIN, min(BATCH, at_once))


# What a forward's error keeps.
ERROR_CHARS = 2000
NO_BODY = "the event's body is gone (pruned by retention): nothing to send"


@dataclass(frozen=True)
class Policy:
    """How often a forward is tried, and how long a sender holds its destination."""

    max_attempts: int
    retry_base_seconds: float
    retry_max_seconds: float
    lease_seconds: float


def take_lease(
    session: Session, destination_id: str, owner: str, now: datetime, seconds: float
) -> bool:
    """Take the destination's lease, or renew ours; False while another relay holds it."""
    free = or_(
        Destination.lease_owner.is_(None),
        Destination.lease_owner == owner,
        Destination.lease_until < now,
    )
    result = session.execute(
        update(Destination)
        .where(Destination.id == destination_id, free)
        .values(lease_owner=owner, lease_until=now + timedelta(seconds=seconds))
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def give_up_lease(session: Session, destination_id: str, owner: str) -> None:
    session.execute(
        update(Destination)
        .where(Destination.id == destination_id, Destination.lease_owner == owner)
        .values(lease_owner=None, lease_until=None)
        .execution_options(synchronize_session=False)
    )


def unclaimed(session: Session, owner: str, now: datetime) -> list[str]:
    """Destinations no live relay sends to, nor this one."""
    query = select(Destination.id).where(
        or_(Destination.lease_owner.is_(None), Destination.lease_until < now),
    )
    return [id_ for id_ in session.scalars(query) if id_]


@dataclass(frozen=True)
class Target:
    """A destination as its sender reads it at each pass."""

    id: str
    name: str
    kind: str
    paused: bool
    rate_limit: float | None
    fingerprint: str
    connection: Connection

    @property
    def version(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """What a publisher is opened with: a change to it opens another."""
        return self.fingerprint, tuple(sorted(self.connection.settings.items()))


def target(
    session: Session, destination_id: str, box: SecretBox, known: Target | None = None
) -> Target | None:
    """The destination with its secrets decrypted; None once it is removed. Its secrets
    are read and decrypted again only when they changed since ``known`` (the pass
    before's), which their fingerprint tells."""
    secrets_: dict[str, str]
    row = session.execute(
        select(
            Destination.name,
            Destination.kind,
            Destination.paused,
            Destination.rate_limit,
            Destination.fingerprint,
            Destination.settings,
            Destination.shown,
        ).where(Destination.id == destination_id)
    ).one_or_none()
    if row is None:
        return None
    if known is not None and known.fingerprint == row.fingerprint:
        # The settings that are not secret as they stand now, the secrets as decrypted.
        secrets_ = known.connection.secrets
    else:
        ciphertext = session.scalar(
            select(Destination.ciphertext).where(Destination.id == destination_id)
        )
        if ciphertext is None:
            return None
        secrets_ = json.loads(box.decrypt(ciphertext))
    connection = Connection(settings=dict(row.settings), secrets=secrets_, shown=row.shown)
    return Target(
        destination_id, row.name, row.kind, row.paused, row.rate_limit, row.fingerprint, connection
    )


class Due(NamedTuple):
    """A forward to send now, and when it was written (its latency's start)."""

    message: Message
    created_at: datetime
    attempts: int


def due(
    session: Session, destination_id: str, now: datetime, limit: int
) -> tuple[list[Due], list[int]]:
    """The destination's forwards to send now, oldest first, at most ``limit``; a keyed
    one only if no earlier forward of its key waits for a later attempt or is dead (those
    that are due come before it in the list). Also returns the forwards whose event has
    lost its body: they cannot be sent."""
    earlier = aliased(Forward)
    blocked = exists().where(
        earlier.destination_id == Forward.destination_id,
        earlier.ordering_key == Forward.ordering_key,
        earlier.id < Forward.id,
        or_(
            earlier.status == DEAD,
            and_(earlier.status == PENDING, earlier.next_attempt_at > now),
        ),
    )
    query = (
        select(
            Forward.id,
            Forward.created_at,
            Forward.attempts,
            Forward.ordering_key,
            Event.endpoint_id,
            Event.provider,
            Event.external_id,
            Event.variant,
            Event.type,
            Event.received_at,
            Event.body,
            Event.headers,
        )
        .join(Event, Event.id == Forward.event_id)
        .where(
            Forward.destination_id == destination_id,
            Forward.status == PENDING,
            or_(Forward.next_attempt_at.is_(None), Forward.next_attempt_at <= now),
            or_(Forward.ordering_key.is_(None), ~blocked),
        )
        .order_by(Forward.id)
        .limit(limit)
    )
    found, bodiless = [], []
    for row in session.execute(query):
        if row.body is None:
            bodiless.append(row.id)
            continue
        message = Message(
            forward_id=row.id,
            key=idempotency_key(row.endpoint_id, row.external_id, row.variant),
            event_id=row.external_id,
            type=row.type,
            provider=row.provider,
            endpoint_id=row.endpoint_id,
            received_at=row.received_at,
            ordering_key=row.ordering_key,
            body=row.body,
            content_type=_content_type(row.headers),
        )
        found.append(Due(message, row.created_at, row.attempts))
    return found, bodiless


def _content_type(headers: dict[str, str] | None) -> str:
    for name, value in (headers or {}).items():
        if name.lower() == "content-type":
            return value
    return "application/json"


def send_in_order(
    publisher: Publisher,
    messages: Sequence[Message],
    failed: set[str] | None = None,
    keep_going: Callable[[], bool] | None = None,
) -> list[tuple[Message, Outcome]]:
    """Every message, in waves: each wave holds every unkeyed message (in the first) and
    the next one of each key, sent together; a key whose message failed sends no more of
    its own in this pass, so a key's messages reach the destination in their order.
    ``failed`` holds the keys that failed earlier in the pass, and gains this call's.
    ``keep_going`` is asked before each wave but the first (it renews the sender's lease);
    False ends the pass there: what was sent is returned."""
    results: list[tuple[Message, Outcome]] = []
    failed = set() if failed is None else failed
    remaining = list(messages)
    first = True
    while remaining:
        if not first and keep_going is not None and not keep_going():
            break
        first = False
        wave: list[Message] = []
        later: list[Message] = []
        keys: set[str] = set()
        for message in remaining:
            key = message.ordering_key
            if key is None:
                wave.append(message)
            elif key in failed:
                continue
            elif key in keys:
                later.append(message)
            else:
                keys.add(key)
                wave.append(message)
        if not wave:
            break
        outcomes = publish(publisher, wave)
        for message, outcome in zip(wave, outcomes, strict=True):
            results.append((message, outcome))
            if not outcome.delivered and message.ordering_key is not None:
                failed.add(message.ordering_key)
        remaining = later
    return results


def publish(publisher: Publisher, wave: Sequence[Message]) -> list[Outcome]:
    """The wave's outcomes; a publisher that raises (it should not) fails the wave with
    the error's kind, never its text, which may quote a URL."""
    try:
        return publisher.publish(wave)
    except Exception as error:
        log.warning("a publisher raised %s: the wave fails", type(error).__name__, exc_info=True)
        reason = f"cannot be sent ({type(error).__name__})"
        return [Outcome(delivered=False, error=reason) for _ in wave]


class Tally(NamedTuple):
    """A pass's outcomes: forwards delivered; attempts failed, of which ``dead`` were
    the forward's last."""

    delivered: int
    failed: int
    dead: int


_forwards = cast(Table, Forward.__table__)
# A failed attempt, written only over a forward still pending (executemany).
_FAILED = (
    update(_forwards)
    .where(_forwards.c.id == bindparam("forward_id"), _forwards.c.status == PENDING)
    .values(
        status=bindparam("new_status"),
        attempts=bindparam("new_attempts"),
        next_attempt_at=bindparam("new_next_attempt_at"),
        last_error=bindparam("new_last_error"),
        ordering_key=bindparam("new_ordering_key"),
    )
)


def record_outcomes(
    session: Session,
    destination_id: str,
    sent: Sequence[tuple[Due, Outcome]],
    bodiless: Sequence[int],
    now: datetime,
    policy: Policy,
) -> Tally:
    """Each forward's new state: delivered; or its next attempt after a pause that grows,
    or dead after the last one, with the error. Only a forward still pending changes: what
    another relay recorded meanwhile (its lease ran out under this one) stays. A forward
    whose body is gone is dead and no longer holds its key back: it cannot be sent."""
    delivered = [due.message.forward_id for due, outcome in sent if outcome.delivered]
    recorded = 0
    if delivered:
        recorded = session.execute(
            update(Forward)
            .where(Forward.id.in_(delivered), Forward.status == PENDING)
            .values(
                status=DELIVERED,
                attempts=Forward.attempts + 1,
                delivered_at=now,
                next_attempt_at=None,
                last_error=None,
            )
            .execution_options(synchronize_session=False)
        ).rowcount  # type: ignore[attr-defined]
    failures = []
    dead = 0
    for due, outcome in sent:
        if outcome.delivered:
            continue
        number = due.attempts + 1
        last = number >= policy.max_attempts
        dead += last
        failures.append(
            {
                "forward_id": due.message.forward_id,
                "new_status": DEAD if last else PENDING,
                "new_attempts": number,
                "new_next_attempt_at": None if last else now + retry_delay(number, policy),
                "new_last_error": (outcome.error or "not acknowledged")[:ERROR_CHARS],
                "new_ordering_key": due.message.ordering_key,
            }
        )
    for forward_id in bodiless:
        dead += 1
        failures.append(
            {
                "forward_id": forward_id,
                "new_status": DEAD,
                "new_attempts": 0,
                "new_next_attempt_at": None,
                "new_last_error": NO_BODY,
                "new_ordering_key": None,
            }
        )
    if failures:
        session.execute(_FAILED, failures)
    tally = Tally(recorded, len(failures), dead)
    _add_up(session, destination_id, tally, failures, now)
    return tally


def _add_up(
    session: Session,
    destination_id: str,
    tally: Tally,
    failures: Sequence[Mapping[str, object]],
    now: datetime,
) -> None:
    """The destination's totals and last outcomes (one sender writes them at a time)."""
    values: dict[str, object] = {}
    if tally.delivered:
        values["delivered_total"] = Destination.delivered_total + tally.delivered
        values["last_delivered_at"] = now
    if failures:
        values["failed_total"] = Destination.failed_total + tally.failed
        values["last_failed_at"] = now
        values["last_error"] = failures[-1]["new_last_error"]
    if values:
        session.execute(
            update(Destination)
            .where(Destination.id == destination_id)
            .values(**values)
            .execution_options(synchronize_session=False)
        )


def retry_delay(attempt: int, policy: Policy) -> timedelta:
    """The pause after a forward's ``attempt``-th failure (hooklatch.db.backoff)."""
    return backoff(attempt, base=policy.retry_base_seconds, maximum=policy.retry_max_seconds)
