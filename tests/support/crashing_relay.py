"""A relay that SIGKILLs itself right after pushing jobs to Redis, before its commit."""

import os
import signal

from hooklatch.runtime import build_runtime
from hooklatch.settings import Settings
from hooklatch.workers.relay.loop import Relay
from hooklatch.workers.relay.sinks import make_sink


def main() -> None:
    runtime = build_runtime(Settings.from_env())
    sink = make_sink(runtime)
    push = sink.push

    def push_then_die(batches):
        push(batches)
        os.kill(os.getpid(), signal.SIGKILL)

    sink.push = push_then_die  # type: ignore[method-assign]  # the crash under test
    Relay(runtime, sink).relay_once()
    raise SystemExit("unreachable: the relay should have been killed after pushing")


if __name__ == "__main__":
    main()
