-- The database's ceiling: hooklatch's per-event ingest transaction (an event row, ignoring a
-- duplicate, and its outbox row, whose trigger notifies the relay), with no HTTP and no Python.
-- Run by the harness as: pgbench --protocol=prepared --define=endpoint=... body=... sha=... headers=...
\set n random(1, 9000000000000000000)
BEGIN;
INSERT INTO events (endpoint_id, provider, external_id, type, occurred_at, received_at, status, attempts, next_attempt_at, body, headers, body_sha256, mismatched_duplicates) VALUES (:endpoint, 'stripe', 'evt_pgbench_' || :n, 'invoice.paid', now(), now(), 'pending', 0, now(), convert_to(:body, 'UTF8'), :headers, :sha, 0) ON CONFLICT (endpoint_id, external_id, variant) DO NOTHING RETURNING id AS event_id \gset
INSERT INTO outbox (event_id, created_at) VALUES (:event_id, now());
COMMIT;
