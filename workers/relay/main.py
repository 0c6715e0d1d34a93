"""`hooklatch relay`: the relay loop until SIGTERM or SIGINT."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from hooklatch.runtime import Runtime
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import make_sink

log = logging.getLogger(__name__)


def run_relay(runtime: Runtime) -> None:
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        log.info("relay stopping (signal %d)", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    log.info("relay started")
    Relay(runtime, make_sink(runtime)).run(stop)
