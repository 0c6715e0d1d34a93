"""A JetStream consumer of hooklatch's nats forwards: it does each event's work once,
and acks a message only once that work is committed.

    pip install nats-py
    python nats_consumer.py nats://127.0.0.1:4222 HOOKLATCH hooklatch.events

JetStream drops a re-send within the stream's duplicate window (Nats-Msg-Id is the
event's idempotency key); one that comes later, or a message redelivered because its ack
was lost, is caught here by the same key, claimed in the transaction of the work.
"""

import asyncio
import sqlite3
import sys

import nats
from nats.errors import TimeoutError as NoMessages

KEY = "Hooklatch-Idempotency-Key"
SCHEMA = """
CREATE TABLE IF NOT EXISTS handled (key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS work (key TEXT NOT NULL, body BLOB NOT NULL);
"""


def open_store(path: str) -> sqlite3.Connection:
    store = sqlite3.connect(path)
    store.executescript(SCHEMA)
    return store


def handle(store: sqlite3.Connection, key: str, body: bytes) -> bool:
    """Do one event's work unless its key was handled already; True if it ran."""
    with store:  # one transaction: committed on leaving, rolled back if the work raises
        claimed = store.execute(
            "INSERT INTO handled (key) VALUES (?) ON CONFLICT DO NOTHING", (key,)
        ).rowcount
        if not claimed:
            return False  # done before: a re-send or a redelivery
        store.execute("INSERT INTO work (key, body) VALUES (?, ?)", (key, body))
    return True


async def consume(
    store: sqlite3.Connection,
    url: str,
    stream: str,
    subject: str,
    *,
    durable: str = "work",
    limit: int | None = None,
    timeout: float = 5.0,
) -> int:
    """Take messages until ``limit`` are acked or none comes for ``timeout`` seconds;
    returns how many were acked. An unacked message comes again after the ack wait."""
    connection = await nats.connect(url)
    acked = 0
    try:
        pull = await connection.jetstream().pull_subscribe(subject, durable, stream=stream)
        while limit is None or acked < limit:
            try:
                batch = await pull.fetch(10 if limit is None else min(10, limit - acked), timeout)
            except NoMessages:
                break
            for message in batch:
                handle(store, (message.headers or {})[KEY], message.data)
                await message.ack_sync()  # after the commit: a crash before it redelivers
                acked += 1
    finally:
        await connection.close()
    return acked


if __name__ == "__main__":
    url, stream, subject = sys.argv[1:4]
    asyncio.run(consume(open_store("work.db"), url, stream, subject, timeout=60))
