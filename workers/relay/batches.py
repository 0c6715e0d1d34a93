"""Bulk replays advance in every relay: a thread that takes a running batch's next step
every second (``hooklatch.events.batches.advance``). No singleton: the batch row is
claimed with ``SKIP LOCKED``, so relays take turns on one batch, and its rate holds
whatever their number."""

from __future__ import annotations

import logging
import threading

from hooklatch.db import reconnect_delay
from hooklatch.events import batches
from hooklatch.logs import Outage
from hooklatch.runtime import Runtime

log = logging.getLogger(__name__)

STEP_SECONDS = 1.0


class BatchRunner:
    def __init__(self, runtime: Runtime, *, step_seconds: float = STEP_SECONDS) -> None:
        self.runtime = runtime
        self.step_seconds = step_seconds

    def once(self) -> int:
        with self.runtime.session_factory.begin() as session:
            settled = batches.advance(session, now=self.runtime.clock())
        if settled:
            self.runtime.wake_dispatcher()  # the embedded dispatcher runs the replays now
        return settled

    def run(self, stop: threading.Event) -> None:
        failures = 0
        outage = Outage(log, "bulk replay step")
        while not stop.is_set():
            try:
                self.once()
            except Exception as exc:  # the database is away: try again later
                failures += 1
                delay = reconnect_delay(failures)
                outage.failed(exc, delay)
                stop.wait(delay)
                continue
            failures = 0
            outage.ok()
            stop.wait(self.step_seconds)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name="hooklatch-replay-batches", daemon=True
        )
        thread.start()
        return thread
