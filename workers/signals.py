"""Stopping a long-running process cleanly on SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)


def stop_on_signals(name: str) -> threading.Event:
    """An event that SIGTERM and SIGINT set (each logged as "<name> stopping"), in place
    of the default handlers that would end the process wherever it is."""
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("%s stopping (signal %d)", name, signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return stop
