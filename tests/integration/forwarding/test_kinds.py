"""Each kind of destination against the real thing: messages published and read back with
the destination's own client (a local HTTP receiver, JetStream, RabbitMQ, Redis), and
the failures a relay meets (nothing listening, a refusal, a redirect) as outcomes, never
as exceptions."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import nats
import pika
import pytest
import redis as redis_lib
from standardwebhooks.webhooks import Webhook

from hooklatch.forwarding.kinds import kind
from hooklatch.forwarding.kinds.base import Outcome, Publisher
from hooklatch.forwarding.message import Message
from hooklatch.providers.base import Delivery
from hooklatch.providers.standard_webhooks import StandardWebhooksProvider
from tests.support.forwarding import message
from tests.support.local_http import Answer, Incoming, LocalServer
from tests.support.pipeline import wait_for
from tests.support.processes import free_port, start_redis
from tests.support.signing import whsec

NATS = "nats://127.0.0.1:4222"
RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/%2F"
REDIS = "redis://127.0.0.1:6379/0"
TIMEOUT = 2.0
SIGNING = whsec("forwarding-receiver")
TOKEN = "tok-3f9a"  # what a receiver's URL may carry, never in an outcome


def publisher(name: str, **settings: str) -> Publisher:
    return kind(name).open(kind(name).check(settings), timeout=TIMEOUT)


def published(name: str, messages: list[Message], **settings: str) -> list[Outcome]:
    """The outcomes of one call, from a publisher opened and closed for it."""
    opened = publisher(name, **settings)
    try:
        return opened.publish(messages)
    finally:
        opened.close()


def refused_quickly(name: str, **settings: str) -> list[Outcome]:
    """Two calls to a destination with nothing listening: each fails at once."""
    opened = publisher(name, **settings)
    try:
        started = time.monotonic()
        calls = [opened.publish([message(1), message(2)]) for _ in range(2)]
        assert time.monotonic() - started < TIMEOUT
    finally:
        opened.close()
    assert calls[0] == calls[1]
    return calls[0]


def hooklatch_verifies(incoming: Incoming) -> None:
    delivery = Delivery("POST", "https://hooks.example.test/in", incoming.headers, incoming.body)
    StandardWebhooksProvider().verify(delivery, secrets=[SIGNING], now=datetime.now(UTC))


# HTTP


class Answering(LocalServer):
    """A receiver answering 500 to a body holding "fail", 302 to one holding "move", 200
    otherwise, keeping what it is sent."""

    def __init__(self, *, port: int = 0, delay: float = 0) -> None:
        self.received: list[Incoming] = []
        self._lock = threading.Lock()
        self._delay = delay
        super().__init__(self._answer, port=port)

    def _answer(self, incoming: Incoming) -> Answer:
        with self._lock:
            self.received.append(incoming)
        time.sleep(self._delay)
        if b"fail" in incoming.body:
            return Answer(500)
        if b"move" in incoming.body:
            return Answer(302, headers={"Location": "/elsewhere"})
        return Answer(204)


@pytest.fixture
def receiver() -> Iterator[Answering]:
    with Answering() as server:
        yield server


def http(url: str) -> dict[str, str]:
    return {"url": f"{url}/in?token={TOKEN}", "signing_secret": SIGNING}


def test_http_posts_each_body_signed_so_hooklatch_and_the_standard_library_verify(receiver):
    sent = [message(n, ordering_key="cus_1" if n == 1 else None) for n in range(1, 4)]
    assert published("http", sent, **http(receiver.url)) == [Outcome(delivered=True)] * 3
    by_id = {incoming.headers["webhook-id"]: incoming for incoming in receiver.received}
    assert sorted(by_id) == sorted(m.key for m in sent)
    for m in sent:
        incoming = by_id[m.key]
        assert (incoming.method, incoming.target, incoming.body) == (
            "POST",
            f"/in?token={TOKEN}",
            m.body,
        )
        assert incoming.headers["content-type"] == "application/json"
        assert {k: incoming.headers.get(k.lower()) for k in m.headers()} == m.headers()
        assert abs(int(incoming.headers["webhook-timestamp"]) - time.time()) < 5
        hooklatch_verifies(incoming)
        Webhook(SIGNING).verify(incoming.body, incoming.headers)
    assert "hooklatch-ordering-key" not in by_id[sent[1].key].headers


def test_http_outcomes_follow_the_messages_order_whatever_order_the_answers_come_in(receiver):
    bodies = [b"fail" if n % 3 == 0 else b"ok" for n in range(12)]
    outcomes = published(
        "http", [message(n, body=b) for n, b in enumerate(bodies)], **http(receiver.url)
    )
    assert [o.delivered for o in outcomes] == [b == b"ok" for b in bodies]
    assert {o.error for o in outcomes if not o.delivered} == {"HTTP 500"}


def test_http_sends_eight_requests_at_once():
    with Answering(delay=0.3) as slow:
        started = time.monotonic()
        outcomes = published("http", [message(n) for n in range(8)], **http(slow.url))
        assert time.monotonic() - started < 0.3 * 3
    assert outcomes == [Outcome(delivered=True)] * 8


def test_http_a_500_fails_and_the_same_message_delivers_once_the_receiver_accepts():
    statuses = [500, 200]
    received: list[Incoming] = []

    def answer(incoming: Incoming) -> Answer:
        received.append(incoming)
        return Answer(statuses.pop(0))

    again = message()
    with LocalServer(answer) as server:
        opened = publisher("http", **http(server.url))
        try:
            assert opened.publish([again]) == [Outcome(False, "HTTP 500")]
            assert opened.publish([again]) == [Outcome(delivered=True)]
        finally:
            opened.close()
    assert [incoming.headers["webhook-id"] for incoming in received] == [again.key] * 2
    for incoming in received:
        hooklatch_verifies(incoming)


def test_http_a_redirect_fails_and_is_not_followed(receiver):
    [outcome] = published("http", [message(body=b"move")], **http(receiver.url))
    assert outcome == Outcome(False, "HTTP 302 (a redirect, which is not followed)")
    assert [incoming.target for incoming in receiver.received] == [f"/in?token={TOKEN}"]


def test_http_a_receiver_that_never_answers_fails_within_the_timeout():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listening, never accepting
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        opened = kind("http").open(kind("http").check(http(url)), timeout=0.2)
        try:
            started = time.monotonic()
            assert opened.publish([message()]) == [Outcome(False, "no answer within 0.2 s")]
            assert time.monotonic() - started < 0.9
        finally:
            opened.close()


def test_http_refused_says_so_without_the_url_and_delivers_once_the_receiver_listens():
    port = free_port()
    url = f"http://user:{TOKEN}@127.0.0.1:{port}"
    opened = publisher("http", **http(url))
    try:
        [refused, _] = opened.publish([message(1), message(2)])
        assert refused == Outcome(False, "connection refused")
        with Answering(port=port) as receiver:
            assert opened.publish([message(3)]) == [Outcome(delivered=True)]
            assert len(receiver.received) == 1
    finally:
        opened.close()


# NATS JetStream


@pytest.fixture
def stream() -> Iterator[tuple[str, str]]:
    """A JetStream stream of the test's own, on a subject of its own: (stream, subject)."""
    name, subject = f"HOOKS_{uuid.uuid4().hex[:8]}", f"hooks.{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        client = await nats.connect(NATS)
        await client.jetstream().add_stream(name=name, subjects=[subject], duplicate_window=60)
        await client.close()

    async def delete() -> None:
        client = await nats.connect(NATS)
        await client.jetstream().delete_stream(name)
        await client.close()

    asyncio.run(create())
    yield name, subject
    asyncio.run(delete())


def stored(name: str) -> list[nats.js.api.RawStreamMsg]:
    async def read() -> list[nats.js.api.RawStreamMsg]:
        client = await nats.connect(NATS)
        js = client.jetstream()
        info = await js.stream_info(name)
        messages = [await js.get_msg(name, seq) for seq in range(1, info.state.messages + 1)]
        await client.close()
        return messages

    return asyncio.run(read())


def test_jetstream_stores_a_message_sent_twice_once(stream):
    name, subject = stream
    first, second = message(1, ordering_key="cus_1"), message(2)
    opened = publisher("nats", url=NATS, subject=subject, stream=name)
    try:
        assert opened.publish([first, second]) == [Outcome(delivered=True)] * 2
        assert opened.publish([first]) == [Outcome(delivered=True, duplicate=True)]
    finally:
        opened.close()
    held = stored(name)
    assert [m.data for m in held] == [first.body, second.body]
    assert held[0].headers is not None
    assert held[0].headers["Nats-Msg-Id"] == first.key
    assert held[0].headers["Content-Type"] == "application/json"
    assert {k: held[0].headers[k] for k in first.headers()} == first.headers()


def test_jetstream_a_subject_no_stream_takes_fails():
    subject = f"unstored.{uuid.uuid4().hex[:8]}"
    [outcome] = published("nats", [message()], url=NATS, subject=subject)
    assert outcome == Outcome(False, f"no stream takes subject {subject}")


def test_jetstream_a_subject_of_another_stream_fails_when_the_stream_is_named(stream):
    _, subject = stream
    [outcome] = published("nats", [message()], url=NATS, subject=subject, stream="ANOTHER")
    assert outcome == Outcome(False, "refused by the stream: expected stream does not match")


def test_jetstream_nothing_listening_fails_at_once():
    url = f"nats://{TOKEN}@127.0.0.1:{free_port()}"
    assert (
        refused_quickly("nats", url=url, subject="hooks.x")
        == [Outcome(False, "cannot connect: connection refused")] * 2
    )


def start_nats(procs, port: int, directory: Path) -> None:
    """A JetStream server of the test's own on ``port``, with a stream taking hooks.late."""
    args = ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(directory)]
    procs("nats-server", args, {"PATH": os.environ["PATH"]})

    def listening() -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, timeout=10, message=f"nats-server on port {port}")

    async def add_stream() -> None:
        client = await nats.connect(f"nats://127.0.0.1:{port}")
        await client.jetstream().add_stream(name="LATE", subjects=["hooks.late"])
        await client.close()

    asyncio.run(add_stream())


@pytest.mark.slow
def test_jetstream_delivers_once_its_server_is_up_after_a_refused_call(procs, tmp_path):
    port = free_port()
    opened = publisher("nats", url=f"nats://127.0.0.1:{port}", subject="hooks.late")
    try:
        assert not opened.publish([message()])[0].delivered
        start_nats(procs, port, tmp_path)
        assert opened.publish([message()]) == [Outcome(delivered=True)]
    finally:
        opened.close()


# RabbitMQ


@pytest.fixture
def channel() -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ))
    yield connection.channel()
    connection.close()


def queue(channel) -> str:
    """A queue of the test's own, taking the default exchange's messages by its name."""
    name = f"hooks-{uuid.uuid4().hex[:8]}"
    channel.queue_declare(name, exclusive=True, auto_delete=True)
    return name


def test_rabbitmq_delivers_persistent_messages_with_the_events_identity(channel):
    name = queue(channel)
    sent = [message(1, ordering_key="cus_1"), message(2)]
    assert published("rabbitmq", sent, url=RABBITMQ, routing_key=name) == [Outcome(True)] * 2
    for m in sent:
        _, properties, body = channel.basic_get(name, auto_ack=True)
        assert body == m.body
        assert (properties.message_id, properties.type) == (m.key, "invoice.paid")
        assert (properties.delivery_mode, properties.content_type) == (2, "application/json")
        assert properties.headers == m.headers()
        assert properties.timestamp == int(m.received_at.timestamp())


def test_rabbitmq_a_routing_key_no_queue_is_bound_to_is_unroutable():
    key = f"nobody-{uuid.uuid4().hex[:8]}"
    outcomes = published("rabbitmq", [message(1), message(2)], url=RABBITMQ, routing_key=key)
    error = f"unroutable: no queue bound to exchange '' with routing key '{key}'"
    assert outcomes == [Outcome(False, error)] * 2


def test_rabbitmq_a_missing_exchange_fails_the_call_and_the_next_connects_again(channel):
    name, exchange = queue(channel), f"hooks-{uuid.uuid4().hex[:8]}"
    opened = publisher("rabbitmq", url=RABBITMQ, exchange=exchange, routing_key=name)
    try:
        outcomes = opened.publish([message(1), message(2)])
        assert [o.delivered for o in outcomes] == [False, False]
        assert outcomes[0].error is not None
        assert outcomes[0].error.startswith("closed by the broker: 404 NOT_FOUND - no exchange")
        channel.exchange_declare(exchange, "direct", auto_delete=True)
        channel.queue_bind(name, exchange, routing_key=name)
        later = message(3)
        assert opened.publish([later]) == [Outcome(delivered=True)]
    finally:
        opened.close()
    assert channel.basic_get(name, auto_ack=True)[2] == later.body


def test_rabbitmq_nothing_listening_fails_at_once():
    url = f"amqp://guest:{TOKEN}@127.0.0.1:{free_port()}/%2F"
    assert (
        refused_quickly("rabbitmq", url=url, routing_key="hooks")
        == [Outcome(False, "connection refused")] * 2
    )


# Redis Streams


@pytest.fixture
def redis_stream() -> Iterator[tuple[redis_lib.Redis, str]]:
    client = redis_lib.Redis.from_url(REDIS)
    key = f"hooklatch-test-forwards-{uuid.uuid4().hex[:8]}"
    yield client, key
    client.delete(key)
    client.close()


def test_redis_adds_one_entry_per_message(redis_stream):
    client, key = redis_stream
    sent = [message(1, ordering_key="cus_1"), message(2), message(3)]
    assert published("redis", sent, url=REDIS, stream=key, maxlen="1000") == [Outcome(True)] * 3
    entries = [fields for _, fields in client.xrange(key)]
    assert [fields[b"key"].decode() for fields in entries] == [m.key for m in sent]
    assert entries[0] == {
        b"key": sent[0].key.encode(),
        b"event_id": sent[0].event_id.encode(),
        b"type": b"invoice.paid",
        b"provider": b"stripe",
        b"endpoint": b"ep_billing",
        b"received_at": b"2026-03-01T12:00:01+00:00",
        b"ordering_key": b"cus_1",
        b"content_type": b"application/json",
        b"body": sent[0].body,
    }
    assert b"ordering_key" not in entries[1]


def test_redis_a_key_holding_another_type_fails_each_message(redis_stream):
    client, key = redis_stream
    client.set(key, "not a stream")
    outcomes = published("redis", [message(1), message(2)], url=REDIS, stream=key)
    assert [o.delivered for o in outcomes] == [False, False]
    assert all(o.error and o.error.startswith("WRONGTYPE") for o in outcomes)


def test_redis_nothing_listening_fails_at_once():
    url = f"redis://:{TOKEN}@127.0.0.1:{free_port()}/0"
    [outcome, _] = refused_quickly("redis", url=url, stream="hooks")
    assert outcome.error is not None and "connection refused" in outcome.error.lower()
    assert TOKEN not in outcome.error


@pytest.mark.slow
def test_redis_delivers_once_its_server_is_up_after_a_refused_call(procs, tmp_path):
    port = free_port()
    opened = publisher("redis", url=f"redis://127.0.0.1:{port}/0", stream="hooks")
    try:
        assert not opened.publish([message()])[0].delivered
        start_redis(procs, port, tmp_path)
        assert opened.publish([message()]) == [Outcome(delivered=True)]
    finally:
        opened.close()
