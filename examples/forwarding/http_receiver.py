"""A receiver of hooklatch's http forwards: it checks the Standard Webhooks signature,
then does each event's work once, however often hooklatch sends it.

    pip install flask standardwebhooks
    SIGNING_SECRET=whsec_... python http_receiver.py  # listens on 127.0.0.1:8000

hooklatch sends a forward again until it gets a 2xx answer, always with the same
webhook-id (the event's idempotency key). The key is claimed in the transaction that
does the work: a repeat finds it, does nothing, and is answered 2xx as well.
"""

import os
import sqlite3

from flask import Flask, request
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

SCHEMA = """
CREATE TABLE IF NOT EXISTS handled (key TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS work (key TEXT NOT NULL, type TEXT NOT NULL, body BLOB NOT NULL);
"""


def open_store(path: str) -> sqlite3.Connection:
    store = sqlite3.connect(path)
    store.executescript(SCHEMA)
    return store


def handle(store: sqlite3.Connection, key: str, body: bytes, event_type: str = "") -> bool:
    """Do one event's work unless its key was handled already; True if it ran."""
    with store:  # one transaction: committed on leaving, rolled back if the work raises
        claimed = store.execute(
            "INSERT INTO handled (key) VALUES (?) ON CONFLICT DO NOTHING", (key,)
        ).rowcount
        if not claimed:
            return False  # done before: a re-send
        # The work itself, in the same transaction as the key.
        store.execute(
            "INSERT INTO work (key, type, body) VALUES (?, ?, ?)", (key, event_type, body)
        )
    return True


def create_app(signing_secret: str, database: str) -> Flask:
    app = Flask(__name__)
    webhook = Webhook(signing_secret)

    @app.post("/hooklatch")
    def receive() -> tuple[str, int]:
        body = request.get_data()
        try:
            webhook.verify(body, dict(request.headers), json_parse=False)
        except WebhookVerificationError:
            return "bad signature", 401  # hooklatch tries again, then the forward is dead
        store = open_store(database)
        try:
            handle(
                store,
                request.headers["webhook-id"],
                body,
                request.headers.get("Hooklatch-Event-Type", ""),
            )
        finally:
            store.close()
        return "", 204  # a re-send is acknowledged too, or hooklatch keeps sending it

    return app


if __name__ == "__main__":
    secret = os.environ["SIGNING_SECRET"]
    create_app(secret, os.environ.get("DATABASE", "work.db")).run(port=8000)
