"""Destinations as an operator changes them: added with their settings checked by their
kind (the secret ones encrypted), their filter and rate limit changed, paused and
resumed, removed; their forwards sent again (a replay, with the same key); each change
audited in the transaction that makes it. Functions take the session first and never
commit."""

from __future__ import annotations

import json
import math
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from fnmatch import fnmatchcase

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.crypto import SecretBox
from hooklatch.endpoints.models import NAME_LENGTH
from hooklatch.endpoints.service import get_endpoint
from hooklatch.errors import BadRequest, Conflict, NotFound
from hooklatch.events.models import Event
from hooklatch.forwarding import kinds
from hooklatch.forwarding.kinds.base import Connection
from hooklatch.forwarding.models import DEAD, DELIVERED, PENDING, STATUSES, Destination, Forward
from hooklatch.jsontypes import JSON, JSONObject

# The most type globs one destination's filter holds, and the most forwards one replay
# sends again (a larger set is replayed in several, each audited).
MAX_TYPES = 50
REPLAY_MAX = 10_000


class Keep(Enum):
    """A setting a change leaves as it is."""

    UNCHANGED = "unchanged"


UNCHANGED = Keep.UNCHANGED


@dataclass(frozen=True)
class Filter:
    """Which processed events go to a destination: of one endpoint (its id), or one
    provider, or any; of a type matching one of ``types`` (none: every type)."""

    endpoint_id: str | None = None
    provider: str | None = None
    types: tuple[str, ...] = ()


def check_types(types: Sequence[str]) -> tuple[str, ...]:
    globs = tuple(glob.strip() for glob in types if glob.strip())
    if len(globs) > MAX_TYPES:
        raise BadRequest(f"at most {MAX_TYPES} type globs", reason="bad_destination")
    for glob in globs:
        if len(glob) > 255:
            raise BadRequest("a type glob is at most 255 characters", reason="bad_destination")
    return globs


def check_rate(rate_limit: float | None) -> float | None:
    if rate_limit is not None and not (rate_limit > 0 and math.isfinite(rate_limit)):
        raise BadRequest(
            "a rate limit is a number of forwards a second, more than 0", reason="bad_destination"
        )
    return rate_limit


def get_destination(session: Session, ref: str) -> Destination:
    """By id or by name."""
    row = session.scalar(
        select(Destination).where((Destination.id == ref) | (Destination.name == ref))
    )
    if row is None:
        raise NotFound(f"no destination {ref!r}", reason="unknown_destination")
    return row


def _connection(kind_name: str, given: Mapping[str, str]) -> Connection:
    try:
        kind = kinds.kind(kind_name)
    except ValueError as exc:
        raise BadRequest(str(exc), reason="unknown_kind") from exc
    try:
        return kind.check(given)
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_destination") from exc


def _store_connection(row: Destination, connection: Connection, box: SecretBox) -> None:
    plaintext = json.dumps(connection.secrets, sort_keys=True)
    row.settings = dict(connection.settings)
    row.ciphertext = box.encrypt(plaintext)
    row.fingerprint = box.fingerprint(plaintext)
    row.shown = connection.shown[:500]


def _filter(session: Session, given: Filter) -> Filter:
    endpoint_id = None
    if given.endpoint_id is not None:
        endpoint_id = get_endpoint(session, given.endpoint_id).id
    return Filter(endpoint_id, given.provider or None, check_types(given.types))


def add_destination(
    session: Session,
    *,
    name: str,
    kind: str,
    given: Mapping[str, str],
    selects: Filter,
    rate_limit: float | None,
    box: SecretBox,
    actor: str,
    now: datetime,
) -> Destination:
    """A new destination; the events processed from now on that its filter matches go there."""
    name = name.strip()
    if not name or len(name) > NAME_LENGTH:
        raise BadRequest(
            f"a destination's name is 1 to {NAME_LENGTH} characters", reason="bad_destination"
        )
    if session.scalar(select(Destination.id).where(Destination.name == name)) is not None:
        raise Conflict(f"a destination is named {name!r} already", reason="destination_exists")
    connection = _connection(kind, given)
    chosen = _filter(session, selects)
    row = Destination(
        id=f"dst_{secrets.token_hex(10)}",
        name=name,
        kind=kind,
        endpoint_id=chosen.endpoint_id,
        provider=chosen.provider,
        types=list(chosen.types),
        rate_limit=check_rate(rate_limit),
        paused=False,
        created_at=now,
        updated_at=now,
    )
    _store_connection(row, connection, box)
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError as exc:  # the same name added at the same moment elsewhere
        raise Conflict(
            f"a destination is named {name!r} already", reason="destination_exists"
        ) from exc
    _record(session, row, "destination.added", actor, now, described(row))
    return row


def change_destination(
    session: Session,
    row: Destination,
    *,
    given: Mapping[str, str] | None = None,
    selects: Filter | None = None,
    rate_limit: float | Keep | None = UNCHANGED,
    box: SecretBox,
    actor: str,
    now: datetime,
) -> Destination:
    """New settings (all of them: a rotated password, another URL), filter, or rate limit
    (``None``: no limit). Forwards waiting keep waiting, and go out with the new
    settings."""
    if given is not None:
        _store_connection(row, _connection(row.kind, given), box)
    if selects is not None:
        chosen = _filter(session, selects)
        row.endpoint_id, row.provider, row.types = (
            chosen.endpoint_id,
            chosen.provider,
            list(chosen.types),
        )
    if not isinstance(rate_limit, Keep):
        row.rate_limit = check_rate(rate_limit)
    row.updated_at = now
    session.flush()
    _record(session, row, "destination.changed", actor, now, described(row))
    return row


def set_paused(
    session: Session, row: Destination, paused: bool, *, actor: str, now: datetime
) -> bool:
    """Pause (forwards keep being recorded, none is sent) or resume (the oldest go first,
    under the rate limit). False if it already was."""
    if row.paused == paused:
        return False
    row.paused, row.updated_at = paused, now
    session.flush()
    action = "destination.paused" if paused else "destination.resumed"
    _record(session, row, action, actor, now, {"name": row.name})
    return True


def remove_destination(session: Session, row: Destination, *, actor: str, now: datetime) -> None:
    """The destination and its forwards go (those waiting are never sent)."""
    _record(session, row, "destination.removed", actor, now, {"name": row.name})
    session.delete(row)
    session.flush()


def rotate_destinations(session: Session, box: SecretBox) -> int:
    """Re-encrypt every destination's secrets with the first key (``hooklatch keys rotate``)."""
    rotated = 0
    for row in session.scalars(select(Destination)):
        row.ciphertext = box.rotate(row.ciphertext)
        row.fingerprint = box.fingerprint(box.decrypt(row.ciphertext))
        rotated += 1
    session.flush()
    return rotated


@dataclass(frozen=True)
class ReplaySet:
    """Which of a destination's forwards to send again: of these statuses, of events
    received in [since, until), of a type matching ``type_glob``, or these events."""

    statuses: tuple[str, ...] = (DEAD,)
    since: datetime | None = None
    until: datetime | None = None
    type_glob: str | None = None
    event_ids: tuple[int, ...] = ()

    def checked(self) -> ReplaySet:
        unknown = set(self.statuses) - set(STATUSES)
        if unknown or not self.statuses:
            raise BadRequest(
                f"statuses are among {', '.join(STATUSES)}", reason="bad_replay_filter"
            )
        return self


def replay_forwards(
    session: Session,
    row: Destination,
    chosen: ReplaySet,
    *,
    dry_run: bool,
    actor: str,
    reason: str | None,
    now: datetime,
) -> JSONObject:
    """The forwards chosen, sent again with their own key, oldest first, under the rate
    limit (a forward waiting already is left as it is; one whose event's body retention
    pruned cannot be sent, and is counted apart). A dry run only counts them; a replay
    says why (``reason_required``)."""
    audit.check_reason(reason)
    if not dry_run and not (reason or "").strip():
        raise BadRequest("a replay needs a reason, for the audit log", reason="reason_required")
    chosen = chosen.checked()
    query = (
        select(Forward.id, Event.type, Event.body.is_(None))
        .join(Event, Event.id == Forward.event_id)
        .where(Forward.destination_id == row.id, Forward.status.in_(chosen.statuses))
        .order_by(Forward.id)
    )
    if chosen.type_glob is not None:
        query = query.where(Event.type.like(like_pattern(chosen.type_glob), escape="\\"))
    if chosen.since is not None:
        query = query.where(Event.received_at >= chosen.since)
    if chosen.until is not None:
        query = query.where(Event.received_at < chosen.until)
    if chosen.event_ids:
        query = query.where(Forward.event_id.in_(chosen.event_ids))
    rows = session.execute(query.limit(REPLAY_MAX + 1)).all()
    capped = len(rows) > REPLAY_MAX
    chosen_rows = [
        (id_, bodiless)
        for id_, type_, bodiless in rows[:REPLAY_MAX]
        if chosen.type_glob is None or fnmatchcase(type_, chosen.type_glob)
    ]
    ids = [id_ for id_, bodiless in chosen_rows if not bodiless]
    summary: JSONObject = {
        "destination": row.name,
        "matched": len(ids),
        "without_body": len(chosen_rows) - len(ids),
        "capped": capped,
        "dry_run": dry_run,
        "first_forward_ids": list[JSON](ids[:20]),
    }
    if dry_run or not ids:
        return {**summary, "replayed": 0}
    waiting = [status for status in chosen.statuses if status != PENDING]
    replayed = 0
    for start in range(0, len(ids), 1000):
        result = session.execute(
            update(Forward)
            .where(Forward.id.in_(ids[start : start + 1000]), Forward.status.in_(waiting))
            .values(
                status=PENDING, attempts=0, next_attempt_at=None, last_error=None, created_at=now
            )
            .execution_options(synchronize_session=False)
        )
        replayed += int(result.rowcount or 0)  # type: ignore[attr-defined]
    summary = {**summary, "replayed": replayed}
    details = {**summary, "reason": reason, "statuses": list[JSON](chosen.statuses)}
    _record(session, row, "destination.replayed", actor, now, details)
    return summary


def like_pattern(glob: str) -> str:
    """A type glob as a LIKE pattern: ``*`` any text, ``?`` and a ``[...]`` class one
    character. It matches all the glob does and may match more (a class, SQLite's LIKE
    ignoring case): the glob itself is applied to what it finds."""
    out: list[str] = []
    at = 0
    while at < len(glob):
        char = glob[at]
        end = glob.find("]", at + 2) if char == "[" else -1
        if char == "*":
            out.append("%")
        elif char == "?":
            out.append("_")
        elif end != -1:
            out.append("_")
            at = end
        elif char in "%_\\":
            out.append("\\" + char)
        else:
            out.append(char)
        at += 1
    return "".join(out)


def counts(session: Session, now: datetime) -> dict[str, JSONObject]:
    """Per destination id: its forwards waiting and dead, and how long the oldest waiting
    one has (seconds); read through the partial indexes of those two states alone."""
    found: dict[str, JSONObject] = {}
    for status in (PENDING, DEAD):
        rows = session.execute(
            select(Forward.destination_id, func.count(), func.min(Forward.created_at))
            .where(Forward.status == status)
            .group_by(Forward.destination_id)
        )
        for destination_id, count, oldest in rows:
            entry = found.setdefault(destination_id, _no_forwards())
            entry[status] = int(count)
            if status == PENDING and oldest is not None:
                entry["oldest_pending_seconds"] = max(0.0, (now - oldest).total_seconds())
    return found


def _no_forwards() -> JSONObject:
    return {PENDING: 0, DEAD: 0, "oldest_pending_seconds": 0.0}


def tally(row: Destination, waiting: JSONObject | None) -> JSONObject:
    """What a destination did and has waiting, as status and the console show it."""
    return {
        **(waiting or _no_forwards()),
        DELIVERED: row.delivered_total,
        "failed_attempts": row.failed_total,
        "last_delivered_at": row.last_delivered_at.isoformat() if row.last_delivered_at else None,
        "last_failed_at": row.last_failed_at.isoformat() if row.last_failed_at else None,
        "last_error": row.last_error,
    }


def described(row: Destination, tally: JSONObject | None = None) -> JSONObject:
    """A destination as every face shows it: never a secret, its fingerprint instead."""
    shown: JSONObject = {
        "id": row.id,
        "name": row.name,
        "kind": row.kind,
        "connection": row.shown,
        "settings": {name: value for name, value in row.settings.items()},
        "fingerprint": row.fingerprint,
        "filter": {
            "endpoint_id": row.endpoint_id,
            "provider": row.provider,
            "types": list[JSON](row.types),
        },
        "rate_limit": row.rate_limit,
        "paused": row.paused,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
    }
    if tally is not None:
        shown["forwards"] = tally
    return shown


def _record(
    session: Session,
    row: Destination,
    action: str,
    actor: str,
    now: datetime,
    details: JSONObject,
) -> None:
    audit.record(session, actor=actor, action=action, target=row.id, now=now, details=details)
