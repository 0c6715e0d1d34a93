"""Forwarding's baselines: the messages hooklatch forwarded, published straight to the
same broker (or receiver) with the same client library, in a plain loop, from one
process, with nothing read or written around them: what that library and that broker can
take here. Each function connects first, then times only its loop, and returns the
messages acknowledged a second.

- http: one ``requests.Session`` POSTing one message after another; and eight threads,
  each with its Session, as hooklatch's publisher sends (eight in flight);
- nats: ``js.publish`` awaited one by one; and waves of up to 200 sent at once with
  ``asyncio.gather``, as hooklatch sends each pass;
- rabbitmq: a pika ``BlockingConnection`` on a channel in confirm mode, each publish
  persistent and mandatory, one after another (pika's blocking adapter waits for each
  confirmation, as hooklatch's publisher does);
- redis: a redis-py pipeline of XADD per 200 messages, as hooklatch pipelines each pass.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pika
import redis
import requests

from bench.procs import BenchError
from hooklatch.forwarding.kinds.rabbitmq import PERSISTENT
from hooklatch.forwarding.kinds.redis_streams import entry
from hooklatch.forwarding.message import Message
from hooklatch.providers.standard_webhooks import signed_headers

WAVE = 200  # hooklatch's pass (hooklatch.forwarding.sending.BATCH)
HTTP_THREADS = 8  # hooklatch's http publisher's (hooklatch.forwarding.kinds.http)


def _rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


def _waves(messages: Sequence[Message]) -> list[Sequence[Message]]:
    return [messages[n : n + WAVE] for n in range(0, len(messages), WAVE)]


def http_headers(message: Message, secret: str) -> dict[str, str]:
    """What hooklatch's http kind sends with a message's body."""
    signed = signed_headers(secret, message.key, now=datetime.now(UTC), body=message.body)
    return {"Content-Type": message.content_type, **message.headers(), **signed}


def http_loop(url: str, messages: Sequence[Message], secret: str) -> float:
    prepared = [(m.body, http_headers(m, secret)) for m in messages]
    with requests.Session() as session:
        session.post(url, data=b"{}", timeout=10).close()  # connected
        started = time.perf_counter()
        for body, headers in prepared:
            answer = session.post(url, data=body, headers=headers, timeout=10)
            answer.close()
            if not 200 <= answer.status_code < 300:
                raise BenchError(f"http baseline: the receiver answered {answer.status_code}")
        return _rate(len(prepared), started)


def http_threads(url: str, messages: Sequence[Message], secret: str) -> float:
    prepared = [(m.body, http_headers(m, secret)) for m in messages]
    sessions = [requests.Session() for _ in range(HTTP_THREADS)]
    shares = [prepared[n::HTTP_THREADS] for n in range(HTTP_THREADS)]

    def send(session: requests.Session, share: list[tuple[bytes, dict[str, str]]]) -> int:
        ok = 0
        for body, headers in share:
            answer = session.post(url, data=body, headers=headers, timeout=10)
            answer.close()
            ok += 200 <= answer.status_code < 300
        return ok

    with ThreadPoolExecutor(HTTP_THREADS) as pool:
        list(pool.map(lambda s: s.post(url, data=b"{}", timeout=10).close(), sessions))
        started = time.perf_counter()
        ok = sum(pool.map(send, sessions, shares))
        rate = _rate(ok, started)
    for session in sessions:
        session.close()
    if ok != len(prepared):
        raise BenchError(f"http baseline: {len(prepared) - ok} messages not answered 2xx")
    return rate


def nats_headers(message: Message) -> dict[str, str]:
    """What hooklatch's nats kind sends with a message's body."""
    return {**message.headers(), "Nats-Msg-Id": message.key, "Content-Type": message.content_type}


def nats_publish(settings: dict[str, str], messages: Sequence[Message], *, waves: bool) -> float:
    import nats

    async def run() -> float:
        client = await nats.connect(settings["url"])
        js = client.jetstream()
        subject, stream = settings["subject"], settings.get("stream")
        prepared = [(m.body, nats_headers(m)) for m in messages]

        def publish(body: bytes, headers: dict[str, str]) -> Any:
            return js.publish(subject, body, headers=headers, stream=stream, timeout=10)

        started = time.perf_counter()
        if waves:
            for n in range(0, len(prepared), WAVE):
                await asyncio.gather(*(publish(*item) for item in prepared[n : n + WAVE]))
        else:
            for item in prepared:
                await publish(*item)
        rate = _rate(len(prepared), started)
        await client.close()
        return rate

    return asyncio.run(run())


def rabbit_publish(settings: dict[str, str], messages: Sequence[Message]) -> float:
    connection = pika.BlockingConnection(pika.URLParameters(settings["url"]))
    channel = connection.channel()
    channel.confirm_delivery()
    prepared = [
        (
            m.body,
            pika.BasicProperties(
                message_id=m.key,
                delivery_mode=PERSISTENT,
                content_type=m.content_type,
                type=m.type,
                headers=m.headers(),
                timestamp=int(m.received_at.timestamp()),
            ),
        )
        for m in messages
    ]
    exchange, routing_key = settings.get("exchange", ""), settings["routing_key"]
    started = time.perf_counter()
    for body, properties in prepared:
        channel.basic_publish(exchange, routing_key, body, properties, mandatory=True)
    rate = _rate(len(prepared), started)
    connection.close()
    return rate


def redis_pipelined(settings: dict[str, str], messages: Sequence[Message]) -> float:
    client = redis.Redis.from_url(settings["url"])
    client.ping()
    stream = settings["stream"]
    prepared = [entry(m) for m in messages]
    started = time.perf_counter()
    for n in range(0, len(prepared), WAVE):
        pipeline = client.pipeline(transaction=False)
        for fields in prepared[n : n + WAVE]:
            pipeline.xadd(stream, fields)
        pipeline.execute()
    rate = _rate(len(prepared), started)
    client.close()
    return rate


# Each kind's baselines, by name: (what it is, how it is run given the destination's
# settings, the messages and the http signing secret).
Baseline = Callable[[dict[str, str], Sequence[Message], str], float]
BASELINES: dict[str, dict[str, tuple[str, Baseline]]] = {
    "http": {
        "loop": (
            "requests.Session POST, one after another",
            lambda s, m, k: http_loop(s["url"], m, k),
        ),
        "threads": (
            f"{HTTP_THREADS} threads, each a requests.Session POSTing",
            lambda s, m, k: http_threads(s["url"], m, k),
        ),
    },
    "nats": {
        "loop": (
            "nats-py js.publish awaited one by one",
            lambda s, m, _: nats_publish(s, m, waves=False),
        ),
        "waves": (
            f"nats-py js.publish, waves of {WAVE} with asyncio.gather",
            lambda s, m, _: nats_publish(s, m, waves=True),
        ),
    },
    "rabbitmq": {
        "loop": (
            "pika BlockingConnection, confirm_delivery, persistent + mandatory, one after another",
            lambda s, m, _: rabbit_publish(s, m),
        ),
    },
    "redis": {
        "pipeline": (
            f"redis-py pipeline of XADD per {WAVE}",
            lambda s, m, _: redis_pipelined(s, m),
        ),
    },
}
