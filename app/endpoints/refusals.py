"""Refused deliveries, counted in memory and written to the refusals table in batches.

Counting each refusal with its own upsert lets a flood of bad signatures turn every
request into a write on one hot row. Instead each web process keeps its counts by
endpoint and reason and writes them on a token bucket: the first ``burst`` refusals at
once (a handful, while someone tries a rotated secret, show in `hooklatch endpoints show`
straight away), then at most one write per ``interval`` seconds, made by the request
that finds a token, or by a background thread when no request comes. Whatever is still
held is written when the process exits normally (``atexit``: a gunicorn worker stopped
or restarted, sync, gthread or gevent) and by ``Runtime.dispose``.

The same budget bounds the log: a refusal whose count is written at once is logged one
by one, with its facts (``add`` says so); the others are summed up in one line per
endpoint and reason when their count is written. A flood writes a few lines per
interval, not one per request.

The thread is started by the first refusal, in the process that counts it: never in a
gunicorn master that forks its workers afterwards. Under gevent's monkey-patching it is
a greenlet, and the lock and events below are gevent's.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from hooklatch.db import reconnect_delay
from hooklatch.endpoints.service import record_refusal

# Logged under the name it had in ingest, which log filters may already select.
log = logging.getLogger("hooklatch.ingest.refusals")
BURST = 10
REASON_LENGTH = 64  # refusals.reason


@dataclass
class Tally:
    """Refusals of one endpoint for one reason, not written yet."""

    count: int
    first_at: datetime
    last_at: datetime
    logged: int = 0  # of them, logged one by one


class RefusalCounter:
    """One web process's refusal counts; ``connect`` gives a connection to write with
    (the runtime's ingest connection: autocommit on PostgreSQL). Its writes share the
    deliveries' connections: a few per flush interval, one at a time."""

    def __init__(
        self,
        connect: Callable[[], AbstractContextManager[Connection]],
        *,
        interval: float,
        burst: int = BURST,
    ) -> None:
        self.connect = connect
        self.interval = interval
        self.burst = burst
        self._held: dict[tuple[str, str], Tally] = {}
        self._lock = threading.Lock()
        # One write at a time: refusals counted at the same moment (a flood's first one)
        # must not each take a database connection.
        self._writing = threading.Lock()
        self._tokens = float(burst)
        self._refilled = time.monotonic()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, endpoint_id: str, reason: str, *, now: datetime) -> bool:
        """Count one refusal; written now if a token is free (and no other write is under
        way), else within the interval. True when a token was free: the caller logs it
        one by one."""
        reason = reason[:REASON_LENGTH]
        if self.interval <= 0:  # no batching: this refusal's own upsert, as it comes
            self._write({(endpoint_id, reason): Tally(1, now, now, logged=1)})
            return True
        with self._lock:
            tally = self._held.get((endpoint_id, reason))
            if tally is None:
                tally = self._held[(endpoint_id, reason)] = Tally(0, now, now)
            tally.count += 1
            tally.first_at, tally.last_at = min(tally.first_at, now), max(tally.last_at, now)
            token = self._take_token()
            if token:
                tally.logged += 1
        if token and self._writing.acquire(blocking=False):
            try:
                self._write_held()
            finally:
                self._writing.release()
        else:
            with self._lock:
                self._start()
            self._wake.set()
        return token

    def flush(self) -> bool:
        """Write every held count: one upsert per endpoint and reason. False when the
        database could not take them (they are held for later)."""
        with self._writing:
            return self._write_held()

    def _write_held(self) -> bool:
        with self._lock:
            held, self._held = self._held, {}
        return self._write(held)

    def _write(self, held: dict[tuple[str, str], Tally]) -> bool:
        for position, ((endpoint_id, reason), tally) in enumerate(held.items()):
            try:
                with self.connect() as connection:
                    record_refusal(
                        connection,
                        endpoint_id,
                        reason,
                        count=tally.count,
                        first_at=tally.first_at,
                        now=tally.last_at,
                    )
            # The database is away, or the process's ingest connections stayed busy.
            except (OperationalError, InterfaceError, PoolTimeout) as error:
                log.debug("refusals not counted yet: %s", type(error).__name__)
                self._hold_again(list(held.items())[position:])
                return False
            except SQLAlchemyError as error:  # the endpoint was deleted meanwhile
                log.debug("refusals not counted: %s", type(error).__name__)
            _log_summed(endpoint_id, reason, tally)
        return True

    def close(self) -> None:
        """Stop the thread and write what is held; the counter counts no more after this."""
        self._closing.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        atexit.unregister(self.close)
        self.flush()

    def _take_token(self) -> bool:
        """The bucket holds up to ``burst`` tokens and gains one per interval."""
        tick = time.monotonic()
        gained = (tick - self._refilled) / self.interval if self.interval > 0 else self.burst
        self._tokens, self._refilled = min(self.burst, self._tokens + gained), tick
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def _next_token_in(self) -> float:
        """0 once there is something to write and a token to write it with (taken), else
        the seconds until the next token."""
        with self._lock:
            if not self._held or self._take_token():
                return 0.0
            return (1 - self._tokens) * self.interval

    def _hold_again(self, unwritten: list[tuple[tuple[str, str], Tally]]) -> None:
        """Counts a flush could not write, back with those counted since, for later."""
        with self._lock:
            for key, tally in unwritten:
                since = self._held.get(key)
                if since is not None:
                    tally.count += since.count
                    tally.logged += since.logged
                    tally.first_at = min(tally.first_at, since.first_at)
                    tally.last_at = max(tally.last_at, since.last_at)
                self._held[key] = tally
            self._start()
            self._wake.set()

    def _start(self) -> None:
        """The writing thread, started once per process (called with the lock held)."""
        if self._thread is None and not self._closing.is_set():
            self._thread = threading.Thread(
                target=self._run, name="hooklatch-refusals", daemon=True
            )
            self._thread.start()
            atexit.register(self.close)

    def _run(self) -> None:
        failures = 0
        while not self._closing.is_set():
            self._wake.wait()
            self._wake.clear()
            while (delay := self._next_token_in()) > 0:
                if self._closing.wait(delay):
                    return  # close() writes what is held
            failures = 0 if self.flush() else failures + 1
            # Counts the database could not take wait, growing, before the next try.
            if failures and self._closing.wait(reconnect_delay(failures)):
                return


def _log_summed(endpoint_id: str, reason: str, tally: Tally) -> None:
    """One line for the refusals of a tally that were not logged one by one."""
    summed = tally.count - tally.logged
    if summed > 0:
        log.warning(
            "refused deliveries: %d more for endpoint %s, %s, from %s to %s "
            "(not logged one by one)",
            summed,
            endpoint_id,
            reason,
            tally.first_at.isoformat(timespec="seconds"),
            tally.last_at.isoformat(timespec="seconds"),
            extra={"reason": reason, "endpoint_id": endpoint_id, "refusals": summed},
        )
