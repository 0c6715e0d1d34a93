"""The embedded default: a relay thread in the web process that runs handlers itself."""

from __future__ import annotations

import atexit
import logging
import threading

from hooklatch.embedded.sinks import InlineSink
from hooklatch.operations.heartbeats import start_heartbeat
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.bulk_replays import BulkReplayRunner
from hooklatch.workers.relay.cleanup import Cleanup
from hooklatch.workers.relay.forwarder import Forwarder
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.reconcile import ReconcileRunner

# Logged under the name it had in the relay's package, which log filters may already select.
log = logging.getLogger("hooklatch.workers.relay.dispatcher")


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
    cleanup = Cleanup(runtime)
    cleanup.start(stop)
    BulkReplayRunner(runtime).start(stop)
    ReconcileRunner(runtime).start(stop)
    Forwarder(runtime).start(stop)
    beating = start_heartbeat(runtime, "dispatcher", stop, cleanup.state)
    # Nothing stops the dispatcher but the process's exit: then its heartbeat row goes, as
    # a relay's does on SIGTERM, instead of showing a silent dispatcher for a day.
    atexit.register(_stop_at_exit, stop, beating)
    log.info("embedded dispatcher started: events are processed in this process")
    return stop


def _stop_at_exit(stop: threading.Event, beating: threading.Thread) -> None:
    stop.set()
    beating.join(timeout=2)
