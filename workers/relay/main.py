"""`hooklatch relay`: the relay loop (and its threads: cleanup, bulk replays, reconcile,
forwarding, heartbeat) until SIGTERM or SIGINT, handing work to ``sink``
(which the command chooses: ``hooklatch.embedded.sinks.make_sink``)."""

from __future__ import annotations

import logging
import time

from hooklatch.metrics import serve as serve_metrics
from hooklatch.operations.backlog import BacklogCollector
from hooklatch.operations.heartbeats import start_heartbeat
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.bulk_replays import BulkReplayRunner
from hooklatch.workers.relay.cleanup import Cleanup
from hooklatch.workers.relay.forwarder import Forwarder
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.reconcile import ReconcileRunner
from hooklatch.workers.relay.sinks import Sink
from hooklatch.workers.signals import stop_on_signals

log = logging.getLogger(__name__)

# How long a stopping relay waits for its cleanup, bulk replay and heartbeat threads.
STOP_SECONDS = 10.0


def run_relay(runtime: Runtime, sink: Sink) -> None:
    stop = stop_on_signals("relay")
    serve_metrics(
        runtime.settings.relay_metrics_port,
        BacklogCollector(runtime),
        address=runtime.settings.metrics_address,
        setting="HOOKLATCH_RELAY_METRICS_PORT",
    )
    cleanup = Cleanup(runtime)
    cleaning = cleanup.start(stop)
    replaying = BulkReplayRunner(runtime).start(stop)
    # A run stops between two pages or chunks when the process does (its lease runs out
    # and the next run resumes from the cursor); not joined below.
    ReconcileRunner(runtime).start(stop)
    forwarder = Forwarder(runtime)
    forwarding = forwarder.start(stop)
    beating = start_heartbeat(runtime, "relay", stop, cleanup.state)
    log.info("relay started")
    Relay(runtime, sink).run(stop)
    # Cleanup stops between two batches (each one short transaction), a bulk replay
    # between two steps, and the heartbeat deletes its row. All within one bound, well
    # inside an orchestrator's grace: a transaction still running past it rolls back
    # with the process, and its rows wait.
    # A sender stops after the message it is sending is acknowledged, or its timeout, and
    # gives its destination's lease back.
    deadline = time.monotonic() + STOP_SECONDS
    for thread in (cleaning, replaying, forwarding, beating):
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    forwarder.join(timeout=max(0.0, deadline - time.monotonic()))
