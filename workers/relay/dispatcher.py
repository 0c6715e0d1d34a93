"""The embedded default: a relay thread in the web process that runs handlers itself."""

from __future__ import annotations

import logging
import threading

from hooklatch.runtime import Runtime
from hooklatch.workers.relay.cleanup import Cleanup
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import InlineSink

log = logging.getLogger(__name__)


def start_embedded_dispatcher(runtime: Runtime) -> threading.Event:
    """Start the dispatcher thread; returns the event that stops it."""
    stop = threading.Event()
    relay = Relay(runtime, InlineSink(runtime))
    thread = threading.Thread(
        target=relay.run,
        args=(stop,),
        kwargs={"wake": runtime.wake},
        name="hooklatch-dispatcher",
        daemon=True,
    )
    thread.start()
    Cleanup(runtime).start(stop)
    log.info("embedded dispatcher started: events are processed in this process")
    return stop
