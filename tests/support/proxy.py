"""A TCP proxy that a test can cut and restore, standing for a network that goes away; and
a port that counts the connections made to it."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from typing import cast


class Listener:
    """A port on 127.0.0.1 whose connections a thread of its own takes until stop();
    ``take`` says what becomes of each (False: stop taking them)."""

    def __init__(self, port: int = 0, backlog: int = 64) -> None:
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(backlog)
        self.listener.settimeout(0.1)
        self.port = self.listener.getsockname()[1]

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self.take(client):
                return

    def take(self, client: socket.socket) -> bool:
        raise NotImplementedError


class CountingListener(Listener):
    """A port that accepts and immediately drops connections, counting them."""

    def __init__(self) -> None:
        super().__init__(backlog=16)
        self.accepted = 0
        self._spawn(self._accept_loop)

    def take(self, client: socket.socket) -> bool:
        self.accepted += 1
        client.close()
        return True

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
        self.listener.close()


class TcpProxy(Listener):
    """Forwards 127.0.0.1:port to a target; stop() closes the listener and every connection."""

    def __init__(self, target: tuple[str, int], port: int = 0) -> None:
        super().__init__(port)
        self.target = target
        self._sockets: set[socket.socket] = set()
        self._spawn(self._accept_loop)

    def take(self, client: socket.socket) -> bool:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return True
        with self._lock:
            if self._stop.is_set():
                client.close()
                upstream.close()
                return False
            self._sockets.update((client, upstream))
        self._spawn(self._pump, client, upstream)
        return True

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        with selectors.DefaultSelector() as selector:
            for sock in peers:
                sock.setblocking(False)
                selector.register(sock, selectors.EVENT_READ)
            try:
                while not self._stop.is_set():
                    for key, _ in selector.select(timeout=0.1):
                        source = cast(socket.socket, key.fileobj)
                        data = source.recv(65536)
                        if not data:
                            return
                        peers[source].setblocking(True)
                        peers[source].sendall(data)
                        peers[source].setblocking(False)
            except OSError:
                return
            finally:
                for sock in peers:
                    self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def stop(self) -> None:
        self._stop.set()
        self.listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            self._close(sock)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout=5)
        assert not any(t.is_alive() for t in threads), "proxy threads did not stop"
