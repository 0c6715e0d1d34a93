"""Destinations as the CLI, the admin API and the console ask for them: listed with what
they did and have waiting, their dead forwards a page at a time, added, changed, paused
and resumed, removed, their forwards replayed. Each opens its own transaction; every
change is audited in it."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select

from hooklatch.events.models import Event
from hooklatch.forwarding import destinations as service
from hooklatch.forwarding.destinations import UNCHANGED, Filter, Keep, ReplaySet
from hooklatch.forwarding.models import DEAD, Destination, Forward
from hooklatch.jsontypes import JSONObject
from hooklatch.runtime import Runtime


def list_destinations(runtime: Runtime) -> list[JSONObject]:
    with runtime.session_factory() as session:
        waiting = service.counts(session, runtime.clock())
        rows = session.scalars(select(Destination).order_by(Destination.name))
        return [service.described(row, service.tally(row, waiting.get(row.id))) for row in rows]


def show_destination(runtime: Runtime, ref: str) -> JSONObject:
    with runtime.session_factory() as session:
        row = service.get_destination(session, ref)
        waiting = service.counts(session, runtime.clock()).get(row.id)
        return service.described(row, service.tally(row, waiting))


def dead_forwards(
    runtime: Runtime, ref: str, *, before: int | None = None, limit: int = 50
) -> tuple[list[JSONObject], int | None]:
    """A destination's dead forwards, newest first, older than the forward ``before``
    (by the dead forwards' partial index), with their event's type; and the id to ask
    for the next page with (None: this is the last)."""
    with runtime.session_factory() as session:
        row = service.get_destination(session, ref)
        query = (
            select(Forward, Event.type)
            .join(Event, Event.id == Forward.event_id)
            .where(Forward.destination_id == row.id, Forward.status == DEAD)
            .order_by(Forward.id.desc())
            .limit(limit + 1)
        )
        if before is not None:
            query = query.where(Forward.id < before)
        found = session.execute(query).all()
    shown: list[JSONObject] = [
        {
            "id": forward.id,
            "event_id": forward.event_id,
            "event_type": event_type,
            "attempts": forward.attempts,
            "last_error": forward.last_error,
            "created_at": forward.created_at.isoformat(),
        }
        for forward, event_type in found[:limit]
    ]
    return shown, (found[limit - 1][0].id if len(found) > limit else None)


def add_destination(
    runtime: Runtime,
    *,
    name: str,
    kind: str,
    given: Mapping[str, str],
    selects: Filter,
    rate_limit: float | None,
    actor: str,
) -> JSONObject:
    with runtime.session_factory.begin() as session:
        row = service.add_destination(
            session,
            name=name,
            kind=kind,
            given=given,
            selects=selects,
            rate_limit=rate_limit,
            box=runtime.box,
            actor=actor,
            now=runtime.clock(),
        )
        return service.described(row)


def change_destination(
    runtime: Runtime,
    ref: str,
    *,
    given: Mapping[str, str] | None = None,
    selects: Filter | None = None,
    rate_limit: float | Keep | None = UNCHANGED,
    actor: str,
) -> JSONObject:
    """``rate_limit``: a number, ``None`` for no limit, or left as it is."""
    with runtime.session_factory.begin() as session:
        row = service.get_destination(session, ref)
        service.change_destination(
            session,
            row,
            given=given,
            selects=selects,
            rate_limit=rate_limit,
            box=runtime.box,
            actor=actor,
            now=runtime.clock(),
        )
        return service.described(row)


def pause_destination(runtime: Runtime, ref: str, *, paused: bool, actor: str) -> JSONObject:
    with runtime.session_factory.begin() as session:
        row = service.get_destination(session, ref)
        changed = service.set_paused(session, row, paused, actor=actor, now=runtime.clock())
        return {**service.described(row), "changed": changed}


def remove_destination(runtime: Runtime, ref: str, *, actor: str) -> JSONObject:
    with runtime.session_factory.begin() as session:
        row = service.get_destination(session, ref)
        shown = service.described(row)
        service.remove_destination(session, row, actor=actor, now=runtime.clock())
        return shown


def replay_forwards(
    runtime: Runtime,
    ref: str,
    chosen: ReplaySet,
    *,
    dry_run: bool,
    actor: str,
    reason: str | None,
) -> JSONObject:
    """The forwards chosen go again with their own keys (a dry run counts them)."""
    with runtime.session_factory.begin() as session:
        row = service.get_destination(session, ref)
        return service.replay_forwards(
            session,
            row,
            chosen,
            dry_run=dry_run,
            actor=actor,
            reason=reason,
            now=runtime.clock(),
        )
