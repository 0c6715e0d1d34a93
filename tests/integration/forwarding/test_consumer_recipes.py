"""The consumer-side recipes of docs/forwarding-*.md (examples/forwarding/), run against
real brokers: messages published straight to each one as hooklatch publishes them, with
the same headers (or stream fields), one event's twice; each key's work is done once,
and every message is acknowledged."""

from __future__ import annotations

import asyncio
import base64
import importlib.util
import os
import secrets
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import nats
import pika
import pytest
import redis
from nats.js.api import StreamConfig
from standardwebhooks.webhooks import Webhook

from hooklatch.events.identity import idempotency_key
from hooklatch.forwarding.message import Message
from tests.support.database import REDIS
from tests.support.install import ROOT

NATS = os.environ.get("HOOKLATCH_TEST_NATS", "nats://127.0.0.1:4222")
AMQP = os.environ.get("HOOKLATCH_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/%2F")
RECIPES = ROOT / "examples" / "forwarding"


def recipe(name: str) -> ModuleType:
    """examples/forwarding/<name>.py, loaded as the page shows it (not a package)."""
    spec = importlib.util.spec_from_file_location(f"recipe_{name}", RECIPES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def forward(number: int, external_id: str) -> Message:
    """A forward of event ``external_id`` as a sender builds it."""
    body = f'{{"id": "{external_id}", "type": "invoice.paid", "n": {number}}}'.encode()
    return Message(
        forward_id=number,
        key=idempotency_key("ep_recipes", external_id, ""),
        event_id=external_id,
        type="invoice.paid",
        provider="stripe",
        endpoint_id="ep_recipes",
        received_at=datetime(2026, 11, 25, 7, 30, number, tzinfo=UTC),
        ordering_key="cus_1" if number % 2 else None,
        body=body,
        content_type="application/json",
    )


# Two events; the first sent again (a relay killed before the acknowledgement came).
FIRST, SECOND = forward(1, "evt_1"), forward(2, "evt_2")
SENT = (FIRST, SECOND, FIRST)


def work_done(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as store:
        rows = store.execute("SELECT key, count(*) FROM work GROUP BY key").fetchall()
    return dict(rows)


ONCE_EACH = {FIRST.key: 1, SECOND.key: 1}


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "work.db"


def test_http_receiver_works_a_resent_event_once_and_refuses_a_bad_signature(store_path):
    module = recipe("http_receiver")
    secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    client = module.create_app(secret, str(store_path)).test_client()

    def post(message: Message, signed_with: str) -> int:
        timestamp = datetime.now(UTC)
        signature = Webhook(signed_with).sign(message.key, timestamp, message.body.decode())
        headers = {
            **message.headers(),
            "Content-Type": message.content_type,
            "webhook-id": message.key,
            "webhook-timestamp": str(int(timestamp.timestamp())),
            "webhook-signature": signature,
        }
        response = client.post("/hooklatch", data=message.body, headers=headers)
        return int(response.status_code)

    assert [post(message, secret) for message in SENT] == [204, 204, 204]
    assert work_done(store_path) == ONCE_EACH
    other = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()
    assert post(forward(3, "evt_3"), other) == 401
    assert work_done(store_path) == ONCE_EACH
    with sqlite3.connect(store_path) as store:
        assert store.execute("SELECT DISTINCT type FROM work").fetchall() == [("invoice.paid",)]


def test_nats_consumer_works_a_resent_event_once_and_acks_every_message(store_path):
    module = recipe("nats_consumer")
    name = f"RECIPE_{uuid.uuid4().hex[:12]}"
    subject = f"recipes.{name}"

    async def scenario() -> tuple[list[bool], int, int, int]:
        connection = await nats.connect(NATS)
        js = connection.jetstream()
        # A short duplicate window, so that a re-send can come after it.
        await js.add_stream(StreamConfig(name=name, subjects=[subject], duplicate_window=0.3))
        try:

            async def publish(message: Message) -> bool:
                headers = {**message.headers(), "Nats-Msg-Id": message.key}
                ack = await js.publish(subject, message.body, stream=name, headers=headers)
                return bool(ack.duplicate)

            duplicates = [await publish(message) for message in SENT]
            # Within the window, JetStream dropped the re-send; after it, one is stored.
            for _ in range(50):
                await asyncio.sleep(0.1)
                if not await publish(FIRST):
                    break
            else:
                pytest.fail("JetStream still took the re-send for a duplicate")
            acked = await module.consume(
                module.open_store(str(store_path)), NATS, name, subject, limit=10, timeout=0.5
            )
            info = await js.consumer_info(name, "work")
            return duplicates, acked, info.num_ack_pending, info.num_pending
        finally:
            await js.delete_stream(name)
            await connection.close()

    duplicates, acked, unacked, left = asyncio.run(scenario())
    assert duplicates == [False, False, True]
    assert (acked, unacked, left) == (3, 0, 0)
    assert work_done(store_path) == ONCE_EACH


@pytest.fixture
def amqp_queue() -> Iterator[str]:
    name = f"recipes-{uuid.uuid4().hex[:12]}"
    connection = pika.BlockingConnection(pika.URLParameters(AMQP))
    connection.channel().queue_declare(name, durable=True)
    connection.close()
    yield name
    connection = pika.BlockingConnection(pika.URLParameters(AMQP))
    connection.channel().queue_delete(name)
    connection.close()


def test_rabbitmq_consumer_works_a_resent_event_once_and_acks_every_message(store_path, amqp_queue):
    module = recipe("rabbitmq_consumer")
    connection = pika.BlockingConnection(pika.URLParameters(AMQP))
    channel = connection.channel()
    channel.confirm_delivery()
    for message in SENT:
        properties = pika.BasicProperties(
            message_id=message.key,
            headers=message.headers(),
            content_type=message.content_type,
            delivery_mode=pika.DeliveryMode.Persistent,
        )
        channel.basic_publish("", amqp_queue, message.body, properties, mandatory=True)
    connection.close()

    acked = module.consume(
        module.open_store(str(store_path)), AMQP, amqp_queue, limit=10, timeout=0.5
    )

    assert acked == 3
    assert work_done(store_path) == ONCE_EACH
    connection = pika.BlockingConnection(pika.URLParameters(AMQP))
    left = connection.channel().queue_declare(amqp_queue, passive=True).method.message_count
    connection.close()
    assert left == 0  # every message acked: none went back to the queue


def stream_fields(message: Message) -> dict[str, str | bytes]:
    """The fields of a redis forward's entry."""
    fields: dict[str, str | bytes] = {
        "key": message.key,
        "event_id": message.event_id,
        "type": message.type,
        "provider": message.provider,
        "endpoint": message.endpoint_id,
        "received_at": message.received_at.isoformat(),
    }
    if message.ordering_key is not None:
        fields["ordering_key"] = message.ordering_key
    return {**fields, "content_type": message.content_type, "body": message.body}


@pytest.fixture
def redis_stream() -> Iterator[tuple[redis.Redis, str]]:
    client = redis.Redis.from_url(REDIS)
    name = f"recipes:{uuid.uuid4().hex[:12]}"
    yield client, name
    client.delete(name)
    client.close()


def test_redis_consumer_works_a_resent_event_once_and_takes_over_a_dead_consumers(
    store_path, redis_stream
):
    module = recipe("redis_consumer")
    client, stream = redis_stream
    for message in SENT:
        client.xadd(stream, stream_fields(message))
    # A consumer of the group read the first entry and died before acking it.
    client.xgroup_create(stream, "work", id="0")
    assert client.xreadgroup("work", "died", {stream: ">"}, count=1)

    acked = module.consume(
        module.open_store(str(store_path)), client, stream, limit=10, timeout=0.5, idle_ms=0
    )

    assert acked == 3
    assert work_done(store_path) == ONCE_EACH
    assert client.xpending(stream, "work")["pending"] == 0
