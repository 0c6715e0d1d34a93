"""A plain, fast HTTP receiver for forwarding's http kind: `python -m bench.receiver PORT`.

One asyncio process, no framework: it reads each request (HTTP/1.1, kept alive, a
Content-Length body), keeps its ``Hooklatch-Idempotency-Key`` header, and answers 204
at once, without verifying the signature: it stands for a receiver that costs next to
nothing, so that what is measured is hooklatch's forwarding. ``GET /keys`` answers the
keys received so far, one a line, in the order they arrived.
"""

from __future__ import annotations

import asyncio
import sys

KEY_HEADER = b"hooklatch-idempotency-key"
NO_CONTENT = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
END_OF_HEAD = b"\r\n\r\n"


class Receiving(asyncio.Protocol):
    """One connection: requests parsed from what arrives, answered in their order."""

    def __init__(self, keys: list[bytes]) -> None:
        self.keys = keys
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (answer := self.next_request()) is not None:
            assert self.transport is not None
            self.transport.write(answer)

    def next_request(self) -> bytes | None:
        """The answer to the first whole request in the buffer (taken off it), or None."""
        end = self.buffer.find(END_OF_HEAD)
        if end < 0:
            return None
        head = self.buffer[:end].split(b"\r\n")
        fields = {}
        for line in head[1:]:
            name, _, value = line.partition(b":")
            fields[name.strip().lower()] = value.strip()
        length = int(fields.get(b"content-length", b"0"))
        if len(self.buffer) < end + 4 + length:
            return None
        self.buffer = self.buffer[end + 4 + length :]
        if head[0].startswith(b"GET /keys "):
            listed = b"\n".join(self.keys)
            return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(listed), listed)
        if KEY_HEADER in fields:
            self.keys.append(fields[KEY_HEADER])
        return NO_CONTENT


async def serve(port: int) -> None:
    keys: list[bytes] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Receiving(keys), "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
