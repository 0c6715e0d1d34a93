"""A relay's background threads (cleanup, bulk replay steps): a step every few seconds
until the relay stops, with a growing pause and one log line while the database is away."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from hooklatch.db import reconnect_delay
from hooklatch.logs import Outage


def repeat(
    stop: threading.Event,
    step: Callable[[], object],
    *,
    every: float,
    what: str,
    logger: logging.Logger,
) -> None:
    """Run ``step`` every ``every`` seconds until ``stop``; after a failure (the database
    is away), again after a pause that grows while it keeps failing."""
    failures = 0
    outage = Outage(logger, what)
    while not stop.is_set():
        try:
            step()
        except Exception as exc:  # the database is away: try again later
            failures += 1
            delay = reconnect_delay(failures)
            outage.failed(exc, delay)
            stop.wait(delay)
            continue
        failures = 0
        outage.ok()
        stop.wait(every)


def start(
    name: str, run: Callable[[threading.Event], None], stop: threading.Event
) -> threading.Thread:
    thread = threading.Thread(target=run, args=(stop,), name=name, daemon=True)
    thread.start()
    return thread
