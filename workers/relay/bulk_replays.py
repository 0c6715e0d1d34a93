"""Bulk replays advance in every relay: a thread that takes a running bulk replay's next step
every second (``hooklatch.events.bulk_replays.advance``), while fewer than
HOOKLATCH_REPLAY_BATCH_WINDOW replays wait to be run. No singleton: the bulk replay's row is
claimed with ``SKIP LOCKED``, so relays take turns on one, and its rate holds
whatever their number."""

from __future__ import annotations

import logging
import threading

from hooklatch.events import bulk_replays
from hooklatch.runtime import Runtime
from hooklatch.workers.relay import background

# Logged under the name it had, which log filters may already select.
log = logging.getLogger("hooklatch.workers.relay.batches")

STEP_SECONDS = 1.0


class BulkReplayRunner:
    def __init__(self, runtime: Runtime, *, step_seconds: float = STEP_SECONDS) -> None:
        self.runtime = runtime
        self.step_seconds = step_seconds

    def once(self) -> int:
        with self.runtime.session_factory.begin() as session:
            settled = bulk_replays.advance(
                session, now=self.runtime.clock(), window=self.runtime.settings.replay_batch_window
            )
        if settled:
            self.runtime.wake_dispatcher()  # the embedded dispatcher runs the replays now
        return settled

    def run(self, stop: threading.Event) -> None:
        background.repeat(
            stop, self.once, every=self.step_seconds, what="bulk replay step", logger=log
        )

    def start(self, stop: threading.Event) -> threading.Thread:
        return background.start("hooklatch-replay-batches", self.run, stop)
