"""The embedded default's gunicorn worker: threads, and a client too slow to send its
request is let go.

A thread reads each request's headers and body, so a client that sends them a byte at a
time would hold that thread until the body is complete: five such clients stopped
`hooklatch serve`. Here a request must arrive within GRACE_SECONDS, plus a second for
every MIN_RATE bytes it has brought: a provider's delivery takes milliseconds and a large
body over a slow link keeps going, while a trickle is cut off after about two seconds.
The clock starts when the connection is queued for a thread, so slow clients that waited
behind others are let go at once instead of each holding a thread in turn.

The embedded default keeps threads (not gevent, as production does) because its handlers
run in this process inside SQLite transactions: under gevent, a handler waiting on the
network would leave SQLite's write lock held while every request blocked the one thread
waiting for it.
"""

from __future__ import annotations

import socket
import time
from contextlib import suppress
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

GRACE_SECONDS = 2.0
MIN_RATE = 1000  # bytes per second


class PacedSocket:
    """A client socket whose reads give up, as if the client had gone, once the request
    is late: more than ``grace`` seconds, plus a second per ``min_rate`` bytes received,
    since ``start()``; it is then shut down.

    Bytes that have already arrived are still read when the request is late, so a
    request that waited in the queue but came in whole is served.
    """

    def __init__(
        self, sock: socket.socket, *, grace: float = GRACE_SECONDS, min_rate: float = MIN_RATE
    ) -> None:
        self._sock = sock
        self._grace = grace
        self._min_rate = min_rate
        self._started = time.monotonic()
        self._received = 0
        self.late = False

    def start(self) -> None:
        """The next request's clock starts now."""
        self._started = time.monotonic()
        self._received = 0

    def recv(self, size: int, flags: int = 0) -> bytes:
        if self.late:
            return b""
        allowed = self._started + self._grace + self._received / self._min_rate
        previous = self._sock.gettimeout()
        self._sock.settimeout(max(allowed - time.monotonic(), 1e-6))
        try:
            data = self._sock.recv(size, flags)
        except TimeoutError:
            self._let_go()
            return b""
        finally:
            self._sock.settimeout(previous)
        self._received += len(data)
        return data

    def _let_go(self) -> None:
        self.late = True
        with suppress(OSError):  # already gone
            self._sock.shutdown(socket.SHUT_RDWR)

    def __getattr__(self, name: str) -> Any:  # whatever the socket's attribute is
        return getattr(self._sock, name)


class PacedThreadWorker(ThreadWorker):
    """gunicorn's gthread worker, reading every request through a PacedSocket."""

    def enqueue_req(self, conn: TConn) -> None:
        if not self.cfg.is_ssl:
            if not isinstance(conn.sock, PacedSocket):
                conn.sock = PacedSocket(conn.sock)
            conn.sock.start()
        super().enqueue_req(conn)
