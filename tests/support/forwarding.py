"""Forwarding under test: messages as the tests send them, destinations added as every
face adds them, a relay's forwarder run in the test process, and what the brokers on
this machine hold."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import text

from hooklatch.forwarding.destinations import Filter
from hooklatch.forwarding.message import Message
from hooklatch.runtime import Runtime
from hooklatch.services import forwarding
from hooklatch.workers.relay.forwarder import Forwarder
from tests.support.database import count
from tests.support.pipeline import wait_for

NATS_URL = "nats://127.0.0.1:4222"
RABBIT_URL = "amqp://guest:guest@127.0.0.1:5672/%2F"
REDIS_URL = "redis://127.0.0.1:6379/0"


def signing_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def add_destination(
    runtime: Runtime,
    kind: str,
    given: dict[str, str],
    *,
    name: str | None = None,
    endpoint: str | None = None,
    provider: str | None = None,
    types: tuple[str, ...] = (),
    rate_limit: float | None = None,
) -> str:
    """A destination added through the use case the CLI, API and console share; its id."""
    shown = forwarding.add_destination(
        runtime,
        name=name or f"{kind}-{uuid.uuid4().hex[:6]}",
        kind=kind,
        given=given,
        selects=Filter(endpoint, provider, types),
        rate_limit=rate_limit,
        actor="test",
    )
    return str(shown["id"])


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def keys_of(runtime: Runtime, endpoint: str) -> set[str]:
    """The idempotency keys of an endpoint's events."""
    with runtime.session_factory() as session:
        rows = session.execute(
            text("SELECT external_id FROM events WHERE endpoint_id = :e"),
            {"e": endpoint},
        )
        return {f"hooklatch:{endpoint}:{external_id}" for (external_id,) in rows}


def pending_forwards(runtime: Runtime) -> int:
    return count(runtime, "SELECT count(*) FROM forwards WHERE status = 'pending'")


def delivered_forwards(runtime: Runtime) -> int:
    return count(runtime, "SELECT count(*) FROM forwards WHERE status = 'delivered'")


@contextmanager
def forwarder(runtime: Runtime) -> Iterator[Forwarder]:
    """A relay's forwarder running in this process until the block ends."""
    stop = threading.Event()
    running = Forwarder(runtime)
    thread = running.start(stop)
    try:
        yield running
    finally:
        stop.set()
        thread.join(timeout=10)
        running.join(timeout=15)


def forward_all(runtime: Runtime, expected: int, *, timeout: float = 60.0) -> None:
    """Run a forwarder until ``expected`` forwards are delivered."""
    with forwarder(runtime):
        wait_for(
            lambda: delivered_forwards(runtime) >= expected,
            timeout=timeout,
            message=f"{expected} forwards delivered",
            explain=lambda: str(_states(runtime)),
        )


def _states(runtime: Runtime) -> Any:
    with runtime.session_factory() as session:
        sql = text("SELECT status, count(*), max(last_error) FROM forwards GROUP BY status")
        return [tuple(row) for row in session.execute(sql)]


class Received:
    """What a destination holds: each message's idempotency key and body, in the
    destination's order."""

    def __init__(self, messages: list[tuple[str, bytes]]) -> None:
        self.messages = messages

    @property
    def keys(self) -> list[str]:
        return [key for key, _ in self.messages]

    def repeats(self) -> int:
        return len(self.keys) - len(set(self.keys))


@contextmanager
def jetstream(*, duplicate_window: float = 120.0, url: str = NATS_URL) -> Iterator[Any]:
    """A stream of its own on a subject of its own; yields (settings, read back)."""
    import asyncio

    import nats

    name = unique("HOOKLATCH_TEST_")
    subject = unique("hooklatch.test.")

    async def create() -> None:
        connection = await nats.connect(url)
        await connection.jetstream().add_stream(
            name=name, subjects=[subject], duplicate_window=duplicate_window
        )
        await connection.close()

    async def read() -> Received:
        connection = await nats.connect(url)
        stream = connection.jetstream()
        total = (await stream.stream_info(name)).state.messages
        found = []
        for sequence in range(1, total + 1):
            message = await stream.get_msg(name, sequence)
            headers = message.headers or {}
            found.append((str(headers["Hooklatch-Idempotency-Key"]), bytes(message.data or b"")))
        await connection.close()
        return Received(found)

    async def delete() -> None:
        connection = await nats.connect(url)
        await connection.jetstream().delete_stream(name)
        await connection.close()

    asyncio.run(create())
    try:
        yield {"url": url, "subject": subject, "stream": name}, lambda: asyncio.run(read())
    finally:
        # The server may be gone: a test that stopped it.
        with suppress(Exception):
            asyncio.run(delete())


@contextmanager
def rabbit_queue(url: str = RABBIT_URL) -> Iterator[Any]:
    """A queue of its own on the default exchange; yields (settings, read back)."""
    import pika

    name = unique("hooklatch-test-")
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.queue_declare(name, durable=True)
    held: list[tuple[str, bytes]] = []

    def read() -> Received:
        while True:
            method, properties, body = channel.basic_get(name, auto_ack=True)
            if method is None:
                return Received(list(held))
            held.append((properties.message_id, body))

    try:
        yield {"url": url, "routing_key": name}, read
    finally:
        channel.queue_delete(name)
        connection.close()


@contextmanager
def redis_stream(url: str = REDIS_URL) -> Iterator[Any]:
    """A stream of its own; yields (settings, read back)."""
    import redis

    name = unique("hooklatch-test-")
    client = redis.Redis.from_url(url)

    def read() -> Received:
        entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(name))
        return Received([(fields[b"key"].decode(), fields[b"body"]) for _, fields in entries])

    try:
        yield {"url": url, "stream": name}, read
    finally:
        client.delete(name)
        client.close()


def message(
    number: int = 1, *, ordering_key: str | None = None, body: bytes | None = None
) -> Message:
    """A forward of a Stripe event, its key unique to this call."""
    event_id = f"evt_{uuid.uuid4().hex[:16]}"
    return Message(
        forward_id=number,
        key=f"stripe:{event_id}",
        event_id=event_id,
        type="invoice.paid",
        provider="stripe",
        endpoint_id="ep_billing",
        received_at=datetime(2026, 3, 1, 12, 0, number, tzinfo=UTC),
        ordering_key=ordering_key,
        body=json.dumps({"id": event_id, "n": number}).encode() if body is None else body,
        content_type="application/json",
    )
