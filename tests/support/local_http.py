"""Real HTTP servers on 127.0.0.1, each in a thread: a provider's API (fake_github) and a
receiver that keeps what it is sent."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


@dataclass(frozen=True)
class Incoming:
    """A request as the server read it: headers with lower-case names."""

    method: str
    target: str  # path and query, as sent
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)


Handle = Callable[[Incoming], Answer]


class LocalServer:
    """``handle`` answers each request, in the server's thread for it; ``url`` is
    http://127.0.0.1:PORT (``port``, or a free port). Use it as a context manager, or
    ``close`` it."""

    def __init__(self, handle: Handle, *, port: int = 0) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", port), _handler_for(handle))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        # A short poll: ``close`` waits for the loop to see it.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"local-http-{self.url}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _handler_for(handle: Handle) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            incoming = Incoming(
                method=self.command,
                target=self.path,
                headers={name.lower(): value for name, value in self.headers.items()},
                body=self.rfile.read(length) if length else b"",
            )
            answer = handle(incoming)
            self.send_response(answer.status)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # the tests' output stays theirs

    return Handler


class Receiver(LocalServer):
    """A webhook receiver that keeps each request it is sent and answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.received: list[Incoming] = []
        self._lock = threading.Lock()
        super().__init__(self._keep)

    def _keep(self, incoming: Incoming) -> Answer:
        with self._lock:
            self.received.append(incoming)
        return Answer(self.status)
