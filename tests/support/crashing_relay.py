"""A relay that signals itself right after pushing jobs to Redis, before its commit:
SIGKILL (`kill`, the default) or SIGTERM (`term`, through `hooklatch relay`'s own stop
handling)."""

import os
import signal
import sys

from hooklatch.assembly import build_runtime
from hooklatch.embedded.sinks import make_sink
from hooklatch.settings import Settings
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.signals import stop_on_signals


def main() -> None:
    how = signal.SIGTERM if sys.argv[1:] == ["term"] else signal.SIGKILL
    runtime = build_runtime(Settings.from_env())
    sink = make_sink(runtime)
    push = sink.push

    def push_then_signal(handoffs):
        push(handoffs)
        os.kill(os.getpid(), how)

    sink.push = push_then_signal  # type: ignore[method-assign]  # the crash under test
    if how == signal.SIGKILL:
        Relay(runtime, sink).relay_once()
        raise SystemExit("unreachable: the relay should have been killed after pushing")
    Relay(runtime, sink).run(stop_on_signals("relay"))


if __name__ == "__main__":
    main()
