"""A Redis Streams consumer of hooklatch's redis forwards, in a consumer group: it does
each event's work once, and XACKs an entry only once that work is committed.

    pip install redis
    python redis_consumer.py redis://127.0.0.1:6379/0 hooklatch:events

An entry hooklatch added again (its relay was killed before XADD answered) carries the
same `key` field (the event's idempotency key), and so does one a consumer read and
never acked, which another takes over with XAUTOCLAIM once it has been idle long enough:
the key is claimed in the transaction of the work, so it runs once.
"""

import sqlite3
import sys

import redis

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
            return False  # done before: a re-send, or taken over from a consumer
        store.execute("INSERT INTO work (key, body) VALUES (?, ?)", (key, body))
    return True


def consume(
    store: sqlite3.Connection,
    client: redis.Redis,
    stream: str,
    *,
    group: str = "work",
    consumer: str = "worker-1",
    limit: int | None = None,
    timeout: float = 5.0,
    idle_ms: int = 60_000,
) -> int:
    """Take entries until ``limit`` are acked or none comes for ``timeout`` seconds:
    first those pending longer than ``idle_ms`` (a consumer died), then new ones."""
    try:
        client.xgroup_create(stream, group, id="0", mkstream=True)
    except redis.ResponseError as exc:  # BUSYGROUP: the group is there already
        if "BUSYGROUP" not in str(exc):
            raise
    acked = 0
    while limit is None or acked < limit:
        count = 10 if limit is None else min(10, limit - acked)
        _, entries, _ = client.xautoclaim(stream, group, consumer, idle_ms, "0-0", count=count)
        if not entries:
            found = client.xreadgroup(group, consumer, {stream: ">"}, count, int(timeout * 1000))
            entries = found[0][1] if found else []
        if not entries:
            break  # nothing came for `timeout` seconds
        for entry_id, fields in entries:
            handle(store, fields[b"key"].decode(), fields[b"body"])
            client.xack(stream, group, entry_id)  # after the commit
            acked += 1
    return acked


if __name__ == "__main__":
    url, stream = sys.argv[1:3]
    consume(open_store("work.db"), redis.Redis.from_url(url), stream, timeout=60)
