"""A RabbitMQ consumer of hooklatch's rabbitmq forwards: it does each event's work once,
and acks a message only once that work is committed.

    pip install pika
    python rabbitmq_consumer.py amqp://guest:guest@127.0.0.1:5672/%2F hooklatch-events

A message hooklatch sent again (its relay was killed before the confirm came), or one
redelivered because its ack was lost, carries the same message_id (the event's
idempotency key): it is claimed in the transaction of the work, so it runs once.
"""

import sqlite3
import sys

import pika

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


def consume(
    store: sqlite3.Connection,
    url: str,
    queue: str,
    *,
    limit: int | None = None,
    timeout: float = 5.0,
) -> int:
    """Take messages until ``limit`` are acked or none comes for ``timeout`` seconds;
    returns how many were acked. Those not acked go back to the queue on close."""
    connection = pika.BlockingConnection(pika.URLParameters(url))
    acked = 0
    try:
        channel = connection.channel()
        channel.basic_qos(prefetch_count=10)
        for method, properties, body in channel.consume(queue, inactivity_timeout=timeout):
            if method is None:
                break  # nothing came for `timeout` seconds
            handle(store, properties.message_id, body)
            channel.basic_ack(method.delivery_tag)  # after the commit
            acked += 1
            if limit is not None and acked >= limit:
                break
        channel.cancel()
    finally:
        connection.close()
    return acked


if __name__ == "__main__":
    url, queue = sys.argv[1:3]
    consume(open_store("work.db"), url, queue, timeout=60)
