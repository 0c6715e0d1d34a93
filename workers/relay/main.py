"""`hooklatch relay`: the relay loop until SIGTERM or SIGINT."""

from __future__ import annotations

import logging

from hooklatch.metrics import serve as serve_metrics
from hooklatch.operations.backlog import BacklogCollector
from hooklatch.operations.heartbeats import start_heartbeat
from hooklatch.runtime import Runtime
from hooklatch.workers.relay.cleanup import Cleanup
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import make_sink
from hooklatch.workers.signals import stop_on_signals

log = logging.getLogger(__name__)


def run_relay(runtime: Runtime) -> None:
    stop = stop_on_signals("relay")
    serve_metrics(runtime.settings.metrics_port, BacklogCollector(runtime))
    cleanup = Cleanup(runtime)
    cleaning = cleanup.start(stop)
    beating = start_heartbeat(runtime, "relay", stop, cleanup.state)
    log.info("relay started")
    Relay(runtime, make_sink(runtime)).run(stop)
    # Between two batches: a batch is one short transaction.
    cleaning.join(timeout=30)
    beating.join(timeout=10)
