"""The destinations as `hooklatch status` and /metrics' gauges see them: for each, its
forwards waiting and dead and the age of the oldest waiting one (read through the
partial indexes of those two states alone: hooklatch.forwarding.destinations.counts),
whether it is paused, and what its senders did (totals kept on its row); and which of
them need a person.

A destination is a row each, so the read is one small query per state and one of the
destinations table, in the caller's reading transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.display import counted, visible
from hooklatch.forwarding.destinations import counts, tally
from hooklatch.forwarding.models import DEAD, PENDING, Destination

# A destination that is not paused and whose oldest waiting forward is older than this is
# not keeping up (down, refusing, or too slow for its rate limit): a problem for status,
# as HooklatchForwardsBacklogOld is for Prometheus (docs/alerts.yml).
OLD_BACKLOG = timedelta(minutes=10)


@dataclass(frozen=True)
class DestinationSignals:
    """What the gauges say of one destination, labelled by its name."""

    name: str
    paused: bool
    pending: int
    dead: int
    oldest_pending_seconds: float


def destination_states(session: Session, *, now: datetime) -> list[dict[str, Any]]:
    """Every destination, by name: its kind, whether it is paused, its forwards waiting
    and dead, the oldest waiting one's age (None: none waits), its totals and last error."""
    waiting = counts(session, now)
    rows = session.scalars(select(Destination).order_by(Destination.name))
    return [_state(row, tally(row, waiting.get(row.id))) for row in rows]


def _state(row: Destination, done: Mapping[str, Any]) -> dict[str, Any]:
    pending = int(done[PENDING])
    return {
        "id": row.id,
        "name": row.name,
        "kind": row.kind,
        "paused": row.paused,
        "pending": pending,
        "dead": int(done[DEAD]),
        "oldest_pending_seconds": (
            round(float(done["oldest_pending_seconds"]), 1) if pending else None
        ),
        "delivered": done["delivered"],
        "failed_attempts": done["failed_attempts"],
        "last_delivered_at": done["last_delivered_at"],
        "last_failed_at": done["last_failed_at"],
        "last_error": done["last_error"],
    }


def destination_signals(session: Session, *, now: datetime) -> tuple[DestinationSignals, ...]:
    """The gauges' values: ``destination_states``, as few of its fields as they need."""
    return tuple(
        DestinationSignals(
            name=state["name"],
            paused=bool(state["paused"]),
            pending=state["pending"],
            dead=state["dead"],
            oldest_pending_seconds=state["oldest_pending_seconds"] or 0.0,
        )
        for state in destination_states(session, now=now)
    )


def forwarding_problems(states: Sequence[Mapping[str, Any]]) -> list[str]:
    """What needs a person: forwards that are dead (a replay sends them again once the
    destination is fixed), and a destination not paused whose oldest waiting forward is
    older than OLD_BACKLOG. A paused destination's backlog is someone's choice."""
    problems = []
    for state in states:
        who = f"destination {visible(state['name'])} ({visible(state['kind'])})"
        if state["dead"]:
            problems.append(
                f"{who}: {counted(state['dead'], 'forward')} dead, never sent: replay them "
                "once it takes them (the console's Destinations page)"
            )
        oldest = state["oldest_pending_seconds"]
        if not state["paused"] and oldest is not None and oldest > OLD_BACKLOG.total_seconds():
            minutes = OLD_BACKLOG.total_seconds() / 60
            problems.append(
                f"{who}: its oldest waiting forward is {oldest:.0f} s old (over {minutes:g} "
                "min): it is down, refusing them, or slower than its rate limit"
            )
    return problems
