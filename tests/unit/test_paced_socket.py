"""The embedded default's client sockets: a request must keep arriving, or it is let go."""

import socket
import threading
import time

import pytest

from hooklatch.embedded.worker import PacedSocket


@pytest.fixture
def pair():
    """Makes a PacedSocket and the client's end of its connection; both closed after."""
    opened: list[socket.socket] = []

    def make(**pace):
        server, client = socket.socketpair()
        opened.extend((server, client))
        return PacedSocket(server, **pace), client

    yield make
    for sock in opened:
        sock.close()


def test_a_trickling_request_is_let_go_once_late_and_the_client_sees_the_close(pair):
    paced, client = pair(grace=0.2)
    client.sendall(b"POST /hooks/ep HTTP/1.1\r\nContent-Length: 1000\r\n\r\n")
    assert paced.recv(4096).startswith(b"POST")
    started = time.monotonic()
    assert paced.recv(4096) == b""
    assert 0.1 < time.monotonic() - started < 1
    assert paced.late and paced.recv(4096) == b""
    client.settimeout(1)
    assert client.recv(1) == b""


def test_a_request_that_waited_but_arrived_whole_is_still_read(pair):
    paced, client = pair(grace=0.05)
    client.sendall(b"x" * 3000)
    time.sleep(0.2)
    assert len(paced.recv(4096)) == 3000
    assert not paced.late


def test_a_body_arriving_at_a_steady_rate_keeps_its_time(pair):
    paced, client = pair(grace=0.2, min_rate=1000)
    received = 0
    for _ in range(6):  # 600 bytes a tenth of a second: above the minimum rate
        client.sendall(b"x" * 600)
        received += len(paced.recv(4096))
        time.sleep(0.1)
    assert received == 3600 and not paced.late


def test_each_request_on_a_connection_gets_its_own_time(pair):
    paced, client = pair(grace=0.3)
    time.sleep(0.4)  # kept alive, idle, longer than one request may take
    paced.start()
    later = threading.Timer(0.1, client.sendall, args=(b"GET /healthz HTTP/1.1\r\n\r\n",))
    later.start()
    assert paced.recv(4096).startswith(b"GET")
    later.join()
