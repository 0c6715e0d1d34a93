"""What `hooklatch status` shows: processes, backlog, failures, cleanup, the providers'
side of endpoints (hooklatch.operations.provider_status) and the destinations forwarded
to (hooklatch.operations.forwarding), in one read.

Every query reads an index or a small table, so it answers at once on millions of
events: pending and due retries by ``(status, next_attempt_at)``, dead events by the
same index, the outbox (work in hand only), refusal counts (one row per endpoint and
reason), heartbeats (one row per process), blocked ordering keys (keyed pending events by
their partial index, and the ordering_keys rows parked), destinations (one row each) with
their pending and dead forwards (by those states' partial indexes).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from hooklatch.db import READ_ONLY
from hooklatch.endpoints.models import Refusal
from hooklatch.events.models import DEAD, PENDING, Event, OutboxEntry
from hooklatch.operations.backlog import beat_alive, kinds
from hooklatch.operations.forwarding import destination_states, forwarding_problems
from hooklatch.operations.models import Heartbeat
from hooklatch.operations.provider_status import provider_problems, provider_sides
from hooklatch.ordering.service import blocked_keys, count_blocked
from hooklatch.runtime import Runtime

REFUSALS_WINDOW = timedelta(hours=1)
# Blocked keys listed (longest blocked first); `hooklatch ordering blocked` lists them all.
BLOCKED_SHOWN = 10


def read_status(runtime: Runtime) -> dict[str, Any]:
    now = runtime.clock()
    connection = runtime.engine.connect().execution_options(**{READ_ONLY: True})
    with connection, connection.begin():
        pending, oldest_pending = connection.execute(
            select(func.count(), func.min(Event.received_at)).where(Event.status == PENDING)
        ).one()
        due = connection.scalar(
            select(func.count()).where(Event.status == PENDING, Event.next_attempt_at <= now)
        )
        dead = connection.scalar(select(func.count()).where(Event.status == DEAD))
        waiting, handed_out, oldest_outbox = connection.execute(
            select(
                func.count().filter(OutboxEntry.job_id.is_(None)),
                func.count().filter(OutboxEntry.job_id.is_not(None)),
                func.min(OutboxEntry.created_at),
            )
        ).one()
        refusals = connection.execute(
            select(Refusal.reason, func.sum(Refusal.count), func.count())
            .where(Refusal.last_at >= now - REFUSALS_WINDOW)
            .group_by(Refusal.reason)
            .order_by(Refusal.reason)
        ).all()
        beats = connection.execute(select(Heartbeat).order_by(Heartbeat.kind, Heartbeat.id)).all()
        blocked_total = count_blocked(connection)
        with Session(bind=connection) as session:  # in the same reading transaction
            blocked = blocked_keys(session, limit=BLOCKED_SHOWN) if blocked_total else []
            sides = provider_sides(session, now=now)
            destinations = destination_states(session, now=now)
    every = runtime.settings.heartbeat_seconds
    processes = [_process(row, now, every) for row in beats]
    return {
        "at": now.isoformat(),
        "embedded": runtime.settings.embedded,
        "processes": processes,
        "alive": {
            kind: sum(1 for p in processes if p["kind"] == kind and p["alive"])
            for kind in kinds(runtime.settings)
        },
        "events": {
            "pending": int(pending),
            "oldest_pending_seconds": _age(now, oldest_pending),
            "retries_due": int(due or 0),
            "dead": int(dead or 0),
        },
        "outbox": {
            "waiting": int(waiting),
            "handed_out": int(handed_out),
            "oldest_seconds": _age(now, oldest_outbox),
        },
        # Counts are kept per endpoint and reason since the first refusal, not per hour:
        # these are the reasons refused within the hour, with their counts to date.
        "refusals_last_hour": [
            {"reason": reason, "count": int(total), "endpoints": int(endpoints)}
            for reason, total, endpoints in refusals
        ],
        "cleanup": _last_cleanup(processes),
        "blocked_keys_count": blocked_total,
        "blocked_keys": [b.as_json() for b in blocked],
        "provider_sides": sides,
        "destinations": destinations,
    }


def _process(beat: Row[Any], now: datetime, every: float) -> dict[str, Any]:
    """A row of the heartbeats table, read on the status's connection."""
    since = (now - beat.beat_at).total_seconds()
    return {
        "kind": beat.kind,
        "hostname": beat.hostname,
        "pid": beat.pid,
        "started_at": beat.started_at.isoformat(),
        "last_beat_seconds": round(since, 1),
        "alive": beat_alive(beat.beat_at, beat.state, now, every),
        "state": beat.state or {},
    }


def _last_cleanup(processes: list[dict[str, Any]]) -> dict[str, Any] | None:
    passes = [p["state"]["cleanup"] for p in processes if p["state"].get("cleanup")]
    return max(passes, key=lambda done: done["finished_at"] or "", default=None)


def _age(now: datetime, then: datetime | None) -> float | None:
    return None if then is None else round(max(0.0, (now - then).total_seconds()), 1)


def unhealthy(status: dict[str, Any]) -> list[str]:
    """Why this deployment cannot process events now, is not getting every event its
    providers send, or is not handing them on to the systems behind it (empty: all is
    well)."""
    missing = [] if status["embedded"] else [k for k, alive in status["alive"].items() if not alive]
    return [
        *(f"no {kind} alive" for kind in missing),
        *provider_problems(status["provider_sides"]),
        *forwarding_problems(status["destinations"]),
    ]
