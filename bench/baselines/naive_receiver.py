"""A naive webhook receiver: verify, insert ignoring duplicates, enqueue one RQ job per event.

Run: ``gunicorn bench.baselines.naive_receiver:app`` with DATABASE_URL, REDIS_URL,
STRIPE_WEBHOOK_SECRET and NAIVE_QUEUE set. NAIVE_ENQUEUE=0 leaves out the enqueue
(a reference point: the same receiver with no queue at all).
"""

from __future__ import annotations

import json
import os
from typing import Any

import psycopg2
from flask import Flask, request
from redis import Redis
from rq import Queue
from stripe import SignatureVerificationError, WebhookSignature

from bench.baselines.naive_jobs import process_event

SCHEMA = """
CREATE TABLE IF NOT EXISTS naive_events (
    id bigserial PRIMARY KEY,
    external_id text NOT NULL UNIQUE,
    type text NOT NULL,
    body bytea NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    processed_at timestamptz
)
"""

app = Flask(__name__)
_connection: Any = None
_queue: Queue | None = None


def connection() -> Any:
    global _connection
    if _connection is None or _connection.closed:
        _connection = psycopg2.connect(os.environ["DATABASE_URL"])
    return _connection


def jobs() -> Queue:
    global _queue
    if _queue is None:
        _queue = Queue(
            os.environ["NAIVE_QUEUE"], connection=Redis.from_url(os.environ["REDIS_URL"])
        )
    return _queue


@app.post("/hooks/<endpoint>")
def receive(endpoint: str) -> Any:
    body = request.get_data()
    try:
        WebhookSignature.verify_header(
            body.decode(),
            request.headers.get("Stripe-Signature"),
            os.environ["STRIPE_WEBHOOK_SECRET"],
            tolerance=300,
        )
    except SignatureVerificationError:
        return {"error": "bad signature"}, 401
    event = json.loads(body)
    db = connection()
    with db.cursor() as cursor:
        cursor.execute(
            "INSERT INTO naive_events (external_id, type, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (external_id) DO NOTHING RETURNING id",
            (event["id"], event["type"], body),
        )
        row = cursor.fetchone()
    db.commit()
    if row is not None and os.environ.get("NAIVE_ENQUEUE", "1") == "1":
        jobs().enqueue(process_event, row[0])
    return {"status": "accepted" if row else "duplicate"}
