"""Ingest: POST /hooks/<endpoint-id> verified on its raw bytes and stored once, with its
outbox row, in one statement."""
