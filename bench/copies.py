"""Small events drained by one process from identical copies of one database: the
workers' own cost per event, without HTTP, gunicorn or a relay beside them, and with less
of a shared machine's noise around it (bench.memory's scenario C).

The events are stored by SQL once, in the bench's database; each run drains a copy of it
(``CREATE DATABASE ... TEMPLATE``) in a process of its own started with one side's
interpreter (``python -m bench.drain_copy``), which runs the jobs' body over every
pending event, as a worker's jobs would, and prints the events and the seconds.
"""

from __future__ import annotations

import json
import os
import statistics
from typing import Any

from bench import load
from bench.arrivals import HANDLERS
from bench.ordering import Side, both_sides, in_pairs, run_quietly
from bench.procs import ROOT, BenchError, psql
from bench.scenarios import Bench

# The headers a Stripe delivery is stored with (lower-case, credentials aside), about 300 bytes.
STORED_HEADERS = {
    "host": "hooks.example.com",
    "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
    "content-type": "application/json; charset=utf-8",
    "content-length": "2013",
    "accept": "*/*; q=0.5, application/xml",
    "cache-control": "no-cache",
    "stripe-signature": "t=1764115200,v1=" + "0" * 64,
}


def fill(bench: Bench, count: int) -> None:
    """``count`` pending events and their outbox rows, stored by SQL."""
    bench.reset()
    body = load.sign("evt_copy_body").body
    psql(
        bench.database_url,
        """
        INSERT INTO events (endpoint_id, provider, external_id, type, occurred_at, received_at,
            status, attempts, next_attempt_at, body, headers, body_sha256, mismatched_duplicates)
        SELECT %s, 'stripe', 'evt_c_' || g, 'invoice.paid', now(), now(), 'pending', 0, now(),
            %s, %s, md5(g::text), 0
        FROM generate_series(1, %s) AS g;
        INSERT INTO outbox (event_id, created_at) SELECT id, now() FROM events;
        """,
        (bench.endpoint_id, body, json.dumps(STORED_HEADERS), count),
    )
    psql(bench.database_url, "VACUUM ANALYZE events")  # every copy starts from the same plan


def copy_run(bench: Bench, side: Side, name: str, count: int) -> dict[str, Any]:
    """A copy of the bench's database drained by one process of this side's code
    (``bench.drain_copy``, run by the side's interpreter)."""
    admin = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    source = bench.database_url.rsplit("/", 1)[1]
    copy = f"{source}_{name.replace('-', '_')}"
    psql(admin, f'CREATE DATABASE "{copy}" TEMPLATE "{source}"')
    url = bench.database_url.rsplit("/", 1)[0] + f"/{copy}"
    try:
        env = {**bench.env(HOOKLATCH_HANDLERS=HANDLERS), "DATABASE_URL": url}
        found = json.loads(
            run_quietly(
                [str(side.python), "-m", "bench.drain_copy"], name, cwd=ROOT, env=env
            ).splitlines()[-1]
        )
        done = psql(
            url,
            "SELECT (SELECT count(*) FROM events WHERE status = 'processed'), "
            "(SELECT count(*) FROM bench_effects)",
        )[0]
    finally:
        psql(admin, f'DROP DATABASE IF EXISTS "{copy}" WITH (FORCE)')
    if found["events"] != count or tuple(done) != (count, count):
        raise BenchError(f"{name}: {found['events']} drained, {done} processed and run, of {count}")
    rate = round(count / found["seconds"], 1)
    bench.log(f"  {name} ({side.name} {side.commit}): {rate:,}/s in one process")
    return {"side": side.name, "commit": side.commit, "events_per_second": rate}


def one_process(
    bench: Bench, count: int, pairs: int, current: Side, baseline: Side | None
) -> dict[str, Any]:
    """``count`` events stored once; copies of them drained by each side in turn, in pairs
    whose order alternates. Medians, and current ÷ baseline."""
    both = both_sides(current, baseline)
    fill(bench, count)
    runs = [
        copy_run(bench, side, f"copy-{n}-{side.name}", count)
        for n, side in in_pairs(current, baseline, pairs)
    ]
    result: dict[str, Any] = {"runs": runs}
    medians = {
        side.name: round(
            statistics.median(r["events_per_second"] for r in runs if r["side"] == side.name), 1
        )
        for side in both
    }
    result["medians"] = medians
    if baseline is not None:
        rate = {(r["side"], n // 2): r["events_per_second"] for n, r in enumerate(runs)}
        ratios = [round(rate["current", n] / rate["baseline", n], 3) for n in range(pairs)]
        result["pair_ratios"] = ratios
        result["ratio"] = round(medians["current"] / medians["baseline"], 3)
        result["pair_ratio_median"] = statistics.median(ratios)
    return result
