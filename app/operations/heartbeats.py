"""Heartbeats: each relay and worker process (and, in the embedded default, each web
process's dispatcher) rewrites its row every few seconds.

`hooklatch status` and the `hooklatch_processes_alive` gauge read them: a process whose
row is three intervals old is silent (stopped, hung, or cut off from the database). A
clean stop deletes the row; a killed process leaves it, silent, until retention removes
it after a day.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, update

from hooklatch.db import reconnect_delay
from hooklatch.logs import Outage, one_line
from hooklatch.operations.models import Heartbeat
from hooklatch.runtime import Runtime

log = logging.getLogger(__name__)

State = Callable[[], dict[str, Any]]


def process_name(kind: str) -> str:
    return f"{kind}/{socket.gethostname()}/{os.getpid()}"


class Beat:
    def __init__(self, runtime: Runtime, kind: str, state: State | None = None) -> None:
        self.runtime = runtime
        self.kind = kind
        self.state = state
        self.id = process_name(kind)
        self.started_at = runtime.clock()

    def once(self) -> None:
        """Write this process's row (an update, or an insert the first time)."""
        now = self.runtime.clock()
        # Its own interval: a reader configured otherwise still knows when it is late.
        state = {"every": self.runtime.settings.heartbeat_seconds}
        state.update(self.state() if self.state else {})
        with self.runtime.session_factory.begin() as session:
            updated = session.execute(
                update(Heartbeat)
                .where(Heartbeat.id == self.id)
                .values(beat_at=now, state=state)
                .execution_options(synchronize_session=False)
            )
            if not updated.rowcount:
                hostname, pid = self.id.split("/")[1:]
                session.add(
                    Heartbeat(
                        id=self.id,
                        kind=self.kind,
                        hostname=hostname,
                        pid=int(pid),
                        started_at=self.started_at,
                        beat_at=now,
                        state=state,
                    )
                )

    def forget(self) -> None:
        with self.runtime.session_factory.begin() as session:
            session.execute(delete(Heartbeat).where(Heartbeat.id == self.id))

    def run(self, stop: threading.Event) -> None:
        interval = self.runtime.settings.heartbeat_seconds
        failures = 0
        outage = Outage(log, "heartbeat")
        while True:
            try:
                with BEATING:
                    self.once()
                failures, wait = 0, interval
                outage.ok()
            except Exception as exc:  # the database is away: beat again when it is back
                failures += 1
                wait = min(interval, reconnect_delay(failures))
                outage.failed(exc, wait)
            if stop.wait(wait):
                break
        try:
            with BEATING:
                self.forget()
        except Exception as exc:  # stopping while the database is away: the row goes silent
            log.warning("heartbeat row left behind (%s)", one_line(exc))


# Held while a beat talks to the database, and by a worker while it forks its work horse:
# a fork in the middle of a beat (its first connection: libpq, TLS and GSSAPI setup, each
# with locks of its own) would copy those locks held into the horse, whose own first
# connection could then wait for them for ever.
BEATING = threading.Lock()


def start_heartbeat(
    runtime: Runtime, kind: str, stop: threading.Event, state: State | None = None
) -> threading.Thread:
    """Beat from a daemon thread until ``stop`` is set, then delete the row."""
    beat = Beat(runtime, kind, state)
    thread = threading.Thread(target=beat.run, args=(stop,), name=f"{kind}-heartbeat", daemon=True)
    thread.start()
    return thread
