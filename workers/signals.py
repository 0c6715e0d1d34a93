"""Stopping a long-running process cleanly on SIGTERM or SIGINT."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable
from types import FrameType

log = logging.getLogger(__name__)


Relay = Callable[[int, FrameType | None], None]


def stop_on_signals(
    name: str, stop: threading.Event | None = None, *, then: Relay | None = None
) -> threading.Event:
    """An event that SIGTERM and SIGINT set (each logged as "<name> stopping"), in place
    of the default handlers that would end the process wherever it is. Pass ``stop`` to
    install the handlers again for the same event (after a library replaced them), and
    ``then`` to pass the signal on after setting it."""
    stop = stop or threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()  # first: the log line below may fail (a write it interrupted)
        with contextlib.suppress(RuntimeError):
            log.info("%s stopping (signal %d)", name, signum)
        if then is not None:
            then(signum, frame)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return stop
