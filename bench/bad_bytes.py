"""A flood of requests with a NUL in their path or query string: what it writes to the log.

The Procfile's web command (gunicorn, its gevent workers, access log off as the Procfile
has it) on a scratch database; 16 kept-alive connections send ``--requests`` requests
(2,000 by default), taking turns among a delivery to ``/hooks/%00``, a GET handshake to
``/hooks/%00?hub.mode=subscribe...`` and the admin API's ``/admin/endpoints/%00/ordering``.
Reports the answers by status, the bytes the web process wrote to its log per request
(target: none, so nothing beyond an access log where one is configured) and the requests
answered per second.

`python -m bench.bad_bytes [--requests N] [--json]` prints the figures; `--smoke` sends
200 and fails if any is answered 5xx.
"""

from __future__ import annotations

import datetime as dt
import http.client
import threading
import time
from collections import Counter
from typing import Any

import click

from bench.flood import REDIS_URL
from bench.procs import BenchError
from bench.scenarios import Bench, Plan, echo_figures, prepared_bench

ADMIN_TOKEN = "bench-admin-token-of-some-length"
REQUESTS: tuple[tuple[str, str, dict[str, str], bytes | None], ...] = (
    ("POST", "/hooks/%00", {"Content-Type": "application/json"}, b'{"id": "evt_1"}'),
    ("GET", "/hooks/%00?hub.mode=subscribe&hub.verify_token=t&hub.challenge=1", {}, None),
    ("GET", "/admin/endpoints/%00/ordering", {"Authorization": f"Bearer {ADMIN_TOKEN}"}, None),
)
CONNECTIONS = 16


def send(port: int, count: int, statuses: Counter[int], lock: threading.Lock) -> None:
    """``count`` requests on one kept-alive connection (a new one when the server closes it)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    seen: Counter[int] = Counter()
    for n in range(count):
        method, path, headers, body = REQUESTS[n % len(REQUESTS)]
        connection.request(method, path, body=body, headers=headers)
        answer = connection.getresponse()
        answer.read()
        seen[answer.status] += 1
        if answer.will_close:
            connection.close()
    connection.close()
    with lock:
        statuses.update(seen)


def flood(bench: Bench, total: int) -> dict[str, Any]:
    with bench.hooklatch(relay=False, HOOKLATCH_ADMIN_TOKEN=ADMIN_TOKEN) as (procs, base):
        web = procs.running[0]
        port = int(base.rsplit(":", 1)[1])
        before = web.log_path.stat().st_size
        statuses: Counter[int] = Counter()
        lock = threading.Lock()
        shares = [total // CONNECTIONS + (n < total % CONNECTIONS) for n in range(CONNECTIONS)]
        senders = [
            threading.Thread(target=send, args=(port, share, statuses, lock)) for share in shares
        ]
        started = time.monotonic()
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()
        seconds = time.monotonic() - started
        time.sleep(0.5)  # anything the workers still write
        written = web.log_path.stat().st_size - before
        procs.check_alive()
    if sum(statuses.values()) != total:
        raise BenchError(f"{total} sent, {sum(statuses.values())} answered")
    return {
        "requests": total,
        "statuses": {str(code): n for code, n in sorted(statuses.items())},
        "log_bytes": written,
        "log_bytes_per_request": round(written / total, 1),
        "requests_per_second": round(total / seconds, 1),
        "web_workers": bench.web_workers,
    }


@click.command()
@click.option("--requests", "total", default=2000, show_default=True, help="Requests sent.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON too.")
@click.option("--smoke", is_flag=True, help="200 requests: a check that the harness runs.")
def main(total: int, as_json: bool, smoke: bool) -> None:
    total = 200 if smoke else total
    with prepared_bench(Plan.for_run(smoke=True), REDIS_URL) as bench:
        figures = flood(bench, total)
    failed = sum(n for code, n in figures["statuses"].items() if code.startswith("5"))
    if failed:
        raise BenchError(f"{failed} of {total} requests with a NUL answered 5xx")
    figures["date"] = dt.date.today().isoformat()
    statuses = ", ".join(f"{n} × {code}" for code, n in figures["statuses"].items())
    echo_figures(
        figures if as_json else None,
        [
            f"{total} requests with a NUL, {figures['web_workers']} web workers: {statuses}",
            f"log: {figures['log_bytes']} bytes, {figures['log_bytes_per_request']} per request",
            f"answered: {figures['requests_per_second']} requests/s",
        ],
    )


if __name__ == "__main__":
    main()
