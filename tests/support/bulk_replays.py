"""Bulk replays driven by hand: one started in the database (``bulk_replays.start``, where
every face's start ends), and a relay's step of the replays due."""

from __future__ import annotations

from typing import Any

from hooklatch.events import bulk_replays
from hooklatch.events.browse import EventFilter

DEAD = EventFilter(status="dead")


def begin_bulk_replay(
    runtime: Any,
    chosen: EventFilter = DEAD,
    *,
    rate: float = 100.0,
    cap: int = 10_000,
    now: Any = None,
) -> int:
    """A bulk replay of ``chosen`` (by default the dead events) begun by alice: its id."""
    with runtime.session_factory.begin() as session:
        batch = bulk_replays.start(
            session,
            chosen,
            actor="alice",
            reason="fixed",
            cap=cap,
            rate=rate,
            now=now or runtime.clock(),
        )
        return batch.id


def step(runtime: Any, now: Any, *, window: int | None = None) -> int:
    """What a relay's step of the bulk replays at ``now`` asks for, in a transaction of its
    own (``window``: the setting's unless given)."""
    with runtime.session_factory.begin() as session:
        window = runtime.settings.replay_batch_window if window is None else window
        return bulk_replays.advance(session, now=now, window=window)
