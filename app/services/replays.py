"""Replays as the operator asks for them: one event, or a bulk replay of what a filter
matches. A bulk replay's cap and rate are the settings' (HOOKLATCH_REPLAY_BATCH_MAX,
HOOKLATCH_REPLAY_BATCH_RATE); once a replay or a bulk replay is asked for, the
dispatcher is woken (the embedded default's runs it at once)."""

from __future__ import annotations

from dataclasses import dataclass

from hooklatch.events import bulk_replays
from hooklatch.events.browse import EventFilter
from hooklatch.events.bulk_replays import Progress
from hooklatch.events.replay import replay_one
from hooklatch.events.serialize import describe_event, describe_replay
from hooklatch.jsontypes import JSONObject
from hooklatch.runtime import Runtime


def replay_event(runtime: Runtime, event_id: int, *, actor: str, reason: str | None) -> JSONObject:
    """One event's handlers run again, audited; the replay as the API answers it."""
    with runtime.session_factory.begin() as session:
        replay = replay_one(session, event_id, actor=actor, reason=reason, now=runtime.clock())
        shown = describe_replay(replay)
    runtime.wake_dispatcher()
    return shown


@dataclass(frozen=True)
class DryRun:
    """What a bulk replay of a filter would replay, changing nothing."""

    matched: int  # counted up to the cap, and one past it
    over_cap: bool
    cap: int
    watermark: int  # the newest event id now: confirmed with it, nothing later is replayed
    filter: dict[str, str]  # as resolved now: "2h" ago stays those two hours
    sample: list[JSONObject]  # the oldest events it matches
    rate: float  # replays a second, once started

    def as_json(self) -> JSONObject:
        return {
            "matched": self.matched,
            "over_cap": self.over_cap,
            "cap": self.cap,
            # Sent back with the reason: the bulk replay replays nothing stored since.
            "watermark": self.watermark,
            "filter": {**self.filter},
            "sample": [*self.sample],
        }


def plan_bulk_replay(runtime: Runtime, events: EventFilter) -> DryRun:
    settings = runtime.settings
    with runtime.session_factory() as session:
        plan = bulk_replays.plan(session, events, cap=settings.replay_batch_max)
        sample = [describe_event(e) for e in plan.sample]
    return DryRun(
        matched=plan.matched,
        over_cap=plan.over_cap,
        cap=plan.cap,
        watermark=plan.watermark,
        filter=events.as_dict(),
        sample=sample,
        rate=settings.replay_batch_rate,
    )


def start_bulk_replay(
    runtime: Runtime, events: EventFilter, *, actor: str, reason: str, watermark: int | None
) -> Progress:
    """A bulk replay of what ``events`` match, up to the dry run's ``watermark`` if given,
    audited; as ``show_bulk_replay`` shows it."""
    settings = runtime.settings
    with runtime.session_factory.begin() as session:
        bulk_replay = bulk_replays.start(
            session,
            events,
            actor=actor,
            reason=reason,
            cap=settings.replay_batch_max,
            rate=settings.replay_batch_rate,
            now=runtime.clock(),
            watermark=watermark,
        )
        shown = bulk_replays.describe(session, bulk_replay)
    runtime.wake_dispatcher()
    return shown


def show_bulk_replay(runtime: Runtime, bulk_replay_id: int) -> Progress:
    """The bulk replay with how its replays have fared so far."""
    with runtime.session_factory() as session:
        return bulk_replays.describe(session, bulk_replays.get(session, bulk_replay_id))


def recent_bulk_replays(runtime: Runtime) -> list[Progress]:
    with runtime.session_factory() as session:
        return [bulk_replays.describe(session, b) for b in bulk_replays.recent(session)]


class CancelledProgress(Progress):
    replays_cancelled: int  # replays asked for and not started, cancelled now


def cancel_bulk_replay(runtime: Runtime, bulk_replay_id: int, *, actor: str) -> CancelledProgress:
    """Stopped, audited; as ``show_bulk_replay`` shows it, with ``replays_cancelled``."""
    with runtime.session_factory.begin() as session:
        cancelled = bulk_replays.cancel(session, bulk_replay_id, actor=actor, now=runtime.clock())
        return {
            **bulk_replays.describe(session, cancelled.bulk_replay),
            "replays_cancelled": cancelled.replays,
        }
