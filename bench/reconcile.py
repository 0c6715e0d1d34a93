"""Reconcile of 10,000 Stripe events that never reached hooklatch, beside live deliveries:
how fast the run fetches and stores them, how fast they are then processed, and what it
does to live deliveries' latency.

The processes are the Procfile's (gunicorn, `hooklatch relay`, one `hooklatch worker`),
with default settings but the public URL and the admin token. Stripe is FakeStripe
(tests/support), a local server that answers as Stripe's API description says and
delivers signed events; it runs in a thread of this process, so its own CPU is taken
from the same cores. The load is made as production makes it, nothing by SQL:

- hooklatch starts, and the endpoint is created and registered at FakeStripe with a
  restricted key through the admin API (``POST /admin/endpoints`` with ``register``):
  FakeStripe holds its URL and makes its signing secret, which hooklatch stores; the
  relay's first scheduled reconcile runs at once and finds nothing;
- **baseline**: live deliveries, signed with that secret, at a steady open-loop rate;
- the web goes down; the events are made at FakeStripe and each is delivered by it to the
  dead URL, which does not answer, so Stripe lists it under ``delivery_success=false``;
- the web comes back, live deliveries resume at the same rate, and a reconcile of the
  endpoint is asked for through the admin API (``POST /admin/endpoints/{id}/reconcile``):
  the next relay step runs it, as it runs the scheduled ones, beside its dispatch of
  events (where production's runs happen; `hooklatch reconcile` runs in its own process).

The live deliveries are sent from a process of their own, so that FakeStripe's work in
this one does not delay them. Figures: the run's requests, pages and duration; events
stored a second (over the run) and processed a second (from the run's start until every
fetched event was processed); live events' handler wait (stored → handler start) and the
deliveries' response time, p99 during the run against the baseline's. Checks that fail
the run: exactly the missing events found and fetched, every event's handler run exactly
once, every live delivery answered 200, no page asked for past Stripe's 30-day horizon,
the run finished within the default budget.

`python -m bench.reconcile [--smoke] [--handler-ms N]` prints the figures (and, in full
mode, writes them to bench/results/<date>-reconcile.json). Smoke runs fail only on a
check, never on a figure.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event as StopEvent
from typing import Any

import click
import requests

from bench import load
from bench.plans import Sized, sized
from bench.procs import BenchError, Procs, free_port, psql, wait_until
from bench.scenarios import Bench, Plan, finish, head_commit, prepared_bench, results_head
from hooklatch.settings import Settings
from tests.support.fake_stripe import ENDPOINTS_WRITE, EVENTS_READ, FakeStripe

REDIS_URL = "redis://127.0.0.1:6379/9"
HANDLERS = "bench.handlers.stamped"
# A restricted key as the credential asks for: reads Events, writes Webhook Endpoints.
KEY = "rk_test_bench_reconcile_7d41c09e5a3b28f6"
TOKEN = "bench-admin-token-0f6b2d9e41c7a35884e1"  # long enough to start with
HORIZON = timedelta(days=30)
RUN = (
    "SELECT id, status, stop_reason, requests, pages, listed, missing, present, fetched, "
    "api_errors, extract(epoch FROM started_at), extract(epoch FROM finished_at) "
    "FROM reconcile_runs WHERE id > %s AND status <> 'running' ORDER BY id LIMIT 1"
)
RUN_FIELDS = [
    "id",
    "status",
    "stop_reason",
    "requests",
    "pages",
    "listed",
    "missing",
    "present",
    "fetched",
    "api_errors",
    "started",
    "finished",
]


@dataclass(frozen=True)
class ReconcilePlan(Sized):
    missing: int = sized(10_000, smoke=100)
    # Live deliveries a second, alone for the baseline and beside the run.
    live_rate: float = 10
    baseline_seconds: float = sized(60, smoke=4)
    # Live deliveries are signed and sent a slice of this many seconds at a time.
    slice_seconds: float = sized(10, smoke=2)
    # The Procfile's one worker; its handler's fixed cost (0: one row written).
    workers: int = 1
    handler_seconds: float = 0.0
    # Threads through which FakeStripe makes its failed deliveries.
    deliver_threads: int = 8
    run_timeout_seconds: float = sized(900, smoke=120)


# -- live deliveries, from a process of their own ---------------------------------------------


@dataclass(frozen=True)
class Live:
    """Live deliveries to ``url``, signed with ``secret``: ``rate`` a second, open loop, in
    slices of ``seconds`` each signed as it starts; ``slices`` of them, or until stopped."""

    url: str
    secret: str
    prefix: str
    rate: float
    seconds: float
    slices: int | None = None


def send_live(live: Live, stop: StopEvent, out: Connection) -> None:
    """The slices, then what they got, through ``out``."""
    results: list[load.OpenLoopResult] = []
    while not stop.is_set() and len(results) != live.slices:
        prefix = f"{live.prefix}{len(results):03d}"
        items = load.signed_batch(prefix, int(live.rate * live.seconds), secret=live.secret)
        results.append(load.open_loop(live.url, items, rate=live.rate))
    out.send(results)
    out.close()


class LiveSender:
    """Live deliveries from a spawned process: FakeStripe, in this one, holds its
    interpreter lock for a while with each page it answers, which would be counted as
    the deliveries' latency."""

    def __init__(self, live: Live) -> None:
        context = multiprocessing.get_context("spawn")
        self._slices = live.slices
        self._stop = context.Event()
        self._results, sending = context.Pipe(duplex=False)
        self._process = context.Process(
            target=send_live, args=(live, self._stop, sending), name=f"live-{live.prefix}"
        )
        self._process.start()
        sending.close()  # the child's end: a child that dies shows as EOF here

    def results(self) -> list[load.OpenLoopResult]:
        """Every slice's result: once they are all sent, or (no count given) once the one
        under way is."""
        if self._slices is None:
            self._stop.set()
        try:
            results: list[load.OpenLoopResult] = self._results.recv()
        except EOFError:
            raise BenchError("the live deliveries' process died") from None
        finally:
            self._process.join(30)
        return results


# -- the load ---------------------------------------------------------------------------------


def admin(base_url: str, path: str, body: dict[str, Any], status: int) -> dict[str, Any]:
    """POST to the admin API, as an operator's script would; its answer's JSON."""
    answer = requests.post(
        f"{base_url}/admin/{path}",
        json=body,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    if answer.status_code != status:
        raise BenchError(f"POST /admin/{path}: {answer.status_code} {answer.text}")
    found: dict[str, Any] = answer.json()
    return found


def registered(base_url: str, fake: FakeStripe) -> tuple[str, str, str]:
    """The endpoint made and registered at FakeStripe with the restricted key through the
    admin API (``POST /admin/endpoints`` with ``register``): its id, URL and webhook's id."""
    register = {"credential": {"api_key": KEY}, "event_types": ["invoice.paid"]}
    made = admin(
        base_url,
        "endpoints",
        {"provider": "stripe", "name": "billing", "register": {**register, "api_url": fake.url}},
        201,
    )
    webhook = made["provider_side"]["webhook"]
    return str(made["id"]), str(made["url"]), str(webhook["hook_id"])


def missing_events(fake: FakeStripe, hook_id: str, plan: ReconcilePlan) -> set[str]:
    """Events made at FakeStripe while hooklatch's web is down, each delivered by it to
    the dead URL (no answer): Stripe lists them under delivery_success=false."""
    now = fake.now()
    invoice = json.loads(load.stripe_event("evt_template", now))["data"]["object"]
    made = [
        str(fake.create_event("invoice.paid", {**invoice, "id": f"in_missing_{n:06d}"})["id"])
        for n in range(plan.missing)
    ]
    with ThreadPoolExecutor(plan.deliver_threads) as pool:
        answers = list(pool.map(lambda event_id: fake.deliver(event_id, hook_id), made))
    if any(answers) or any(fake.delivery_success(event_id) for event_id in made):
        raise BenchError("a delivery to the dead URL was answered")
    return set(made)


def finished_run(bench: Bench, after: int, timeout: float) -> dict[str, Any]:
    """The first reconcile run past ``after`` that has ended, once it has."""
    found: list[tuple[Any, ...]] = []

    def ended() -> bool:
        found[:] = psql(bench.database_url, RUN, (after,))
        return bool(found)

    wait_until(ended, timeout=timeout, what="the reconcile run to end", interval=0.5)
    row = dict(zip(RUN_FIELDS, found[0], strict=True))
    row["started"], row["finished"] = float(row["started"]), float(row["finished"])
    return row


def processed(bench: Bench, origin: str) -> int:
    return int(
        psql(
            bench.database_url,
            "SELECT count(*) FROM events WHERE origin = %s AND status = 'processed'",
            (origin,),
        )[0][0]
    )


# -- the scenario -----------------------------------------------------------------------------


@dataclass
class Measured:
    """What the scenario saw, for the checks and the figures."""

    created: set[str]
    scheduled: dict[str, Any]
    run: dict[str, Any]
    warm: list[load.OpenLoopResult]
    alone: list[load.OpenLoopResult]
    beside: list[load.OpenLoopResult]
    asked_at: float
    pages: list[dict[str, str]]
    settings: dict[str, str]


def run(bench: Bench, plan: ReconcilePlan) -> dict[str, Any]:
    bench.reset()
    psql(bench.database_url, "TRUNCATE bench_stamped_runs")
    port = free_port()
    extra = {
        "HOOKLATCH_PUBLIC_URL": f"http://127.0.0.1:{port}",
        "HOOKLATCH_ADMIN_TOKEN": TOKEN,
        "BENCH_HANDLER_SECONDS": repr(plan.handler_seconds),
    }
    with FakeStripe() as fake:
        fake.add_key(KEY, permissions=(EVENTS_READ, ENDPOINTS_WRITE))
        measured = phases(bench, plan, fake, port, extra)
        measured.pages = [
            r.params for r in fake.requests if (r.method, r.path) == ("GET", "/v1/events")
        ]
    shown = {**extra, "HOOKLATCH_ADMIN_TOKEN": "(set)"}
    measured.settings = {"HOOKLATCH_HANDLERS": HANDLERS, **shown}
    return check_and_figures(bench, plan, measured)


def phases(
    bench: Bench, plan: ReconcilePlan, fake: FakeStripe, port: int, extra: dict[str, str]
) -> Measured:
    pace = (plan.live_rate, plan.slice_seconds)
    env = bench.env(HOOKLATCH_HANDLERS=HANDLERS, **extra)  # what the processes get
    server = bench.hooklatch(workers=plan.workers, handlers=HANDLERS, port=port, **extra)  # type: ignore[arg-type]
    with server as (procs, base_url):
        endpoint_id, url, hook_id = registered(base_url, fake)
        secret = fake.secret_of(hook_id)  # what hooklatch stored, and Stripe signs with
        bench.log("  registered; the relay's first scheduled run")
        scheduled = finished_run(bench, 0, timeout=60)
        # Not measured: each web worker's first requests, and the senders' connections.
        warm = LiveSender(Live(url, secret, "warm", *pace, slices=1)).results()
        bench.log(f"  baseline: live deliveries alone, {plan.baseline_seconds:g} s")
        slices = max(1, round(plan.baseline_seconds / plan.slice_seconds))
        alone = LiveSender(Live(url, secret, "alone", *pace, slices=slices)).results()
        bench.log(f"  web down: {plan.missing:,} events made at FakeStripe, delivered to no one")
        procs.stop(next(proc for proc in procs.running if proc.name == "web"))
        created = missing_events(fake, hook_id, plan)
        bench.start_web(procs, env, port)
        bench.log("  web up: live deliveries again, and a reconcile asked through the admin API")
        sender = LiveSender(Live(url, secret, "beside", *pace))
        time.sleep(2)
        asked_at = time.time()
        admin(base_url, f"endpoints/{endpoint_id}/reconcile", {"requested_by": "bench"}, 202)
        ended = finished_run(bench, int(scheduled["id"]), timeout=plan.run_timeout_seconds)
        bench.log(f"  run {ended['status']}: {ended['fetched']:,} fetched; processing them")
        wait_processed(bench, procs, "api", plan.missing, plan.run_timeout_seconds)
        beside = sender.results()
        live = sum(r.sent for r in warm + alone + beside)
        # Live events stored behind the fetched ones may still wait for them.
        wait_processed(bench, procs, "webhook", live, plan.run_timeout_seconds)
        procs.check_alive()
    return Measured(created, scheduled, ended, warm, alone, beside, asked_at, [], {})


def wait_processed(bench: Bench, procs: Procs, origin: str, count: int, timeout: float) -> None:
    def done() -> bool:
        procs.check_alive()
        return processed(bench, origin) >= count

    wait_until(done, timeout=timeout, what=f"{count:,} events ({origin}) processed")


# -- checks and figures -----------------------------------------------------------------------


def check_run(plan: ReconcilePlan, measured: Measured, defaults: Settings) -> None:
    scheduled, ran = measured.scheduled, measured.run
    if (scheduled["status"], scheduled["missing"]) != ("finished", 0):
        raise BenchError(f"the scheduled run at the relay's start: {scheduled}")
    counts = (ran["listed"], ran["missing"], ran["fetched"], ran["present"])
    if ran["status"] != "finished" or counts != (plan.missing, plan.missing, plan.missing, 0):
        raise BenchError(
            f"run {ran['status']} ({ran['stop_reason']}): listed, missing, fetched, present "
            f"{counts}, for {plan.missing} missing"
        )
    budget = (defaults.reconcile_max_requests, defaults.reconcile_max_pages)
    if ran["requests"] > budget[0] or ran["pages"] > budget[1]:
        raise BenchError(f"{ran['requests']} requests, {ran['pages']} pages: past {budget}")
    horizon = ran["finished"] - HORIZON.total_seconds()
    early = [p for p in measured.pages if int(p.get("created[gte]", 0)) < horizon]
    if early or not measured.pages:
        raise BenchError(f"{len(early)} pages asked for past Stripe's 30-day horizon: {early[:3]}")


def check_runs(bench: Bench, measured: Measured) -> int:
    """Each fetched event is exactly one Stripe made, and every event's handler ran
    exactly once; returns the handler runs."""
    fetched = {
        str(row[0])
        for row in psql(bench.database_url, "SELECT external_id FROM events WHERE origin = 'api'")
    }
    if fetched != measured.created:
        raise BenchError(
            f"fetched {len(fetched)} events, {len(fetched - measured.created)} of them not "
            f"among the {len(measured.created)} missing"
        )
    runs, events, stored = (
        int(x)
        for x in psql(
            bench.database_url,
            "SELECT (SELECT count(*) FROM bench_stamped_runs), "
            "(SELECT count(DISTINCT event_id) FROM bench_stamped_runs), "
            "(SELECT count(*) FROM events)",
        )[0]
    )
    live = sum(r.sent for r in measured.warm + measured.alone + measured.beside)
    if not runs == events == stored == len(measured.created) + live:
        raise BenchError(
            f"{runs} handler runs of {events} events; {stored} stored, for "
            f"{len(measured.created)} fetched and {live} live"
        )
    every = (("warm-up", measured.warm), ("baseline", measured.alone))
    for name, results in (*every, ("beside the run", measured.beside)):
        if failed := sum(r.failures for r in results):
            raise BenchError(f"{name}: {failed} live deliveries not answered 200")
    return runs


def live_waits(bench: Bench, prefix: str) -> list[tuple[float, float]]:
    """Each live event of ``prefix``: when it was stored (Unix time) and its handler's wait
    (ms), from that to its run's start."""
    rows = psql(
        bench.database_url,
        "SELECT extract(epoch FROM e.received_at), r.started_at FROM events e "
        "JOIN bench_stamped_runs r ON r.event_id = e.id WHERE e.external_id LIKE %s",
        (f"evt_{prefix}%",),
    )
    return [(float(stored), (float(started) - float(stored)) * 1000) for stored, started in rows]


def fetched_times(bench: Bench) -> tuple[float, float, float]:
    """When the run stored its first and last event, and when the last was processed."""
    row = psql(
        bench.database_url,
        "SELECT extract(epoch FROM min(received_at)), extract(epoch FROM max(received_at)), "
        "extract(epoch FROM max(processed_at)) FROM events WHERE origin = 'api'",
    )[0]
    return float(row[0]), float(row[1]), float(row[2])


def check_and_figures(bench: Bench, plan: ReconcilePlan, measured: Measured) -> dict[str, Any]:
    defaults = Settings()
    check_run(plan, measured, defaults)
    runs = check_runs(bench, measured)
    ran = measured.run
    first_stored, last_stored, last_processed = fetched_times(bench)
    window = (ran["started"], last_processed)
    base = [ms for _, ms in live_waits(bench, "alone")]
    beside = live_waits(bench, "beside")
    during = [ms for at, ms in beside if window[0] <= at <= window[1]]
    # Stored while the run itself went on (listing and storing), before the processing
    # of what it stored was done.
    fetching = [ms for at, ms in beside if ran["started"] <= at <= ran["finished"]]
    answers = [ms for r in measured.beside for at, ms in r.samples if window[0] <= at <= window[1]]
    base_answers = [ms for r in measured.alone for _, ms in r.samples]
    seconds = ran["finished"] - ran["started"]
    return {
        "hand_set": measured.settings,
        "default_budget": {
            "HOOKLATCH_RECONCILE_MAX_REQUESTS": defaults.reconcile_max_requests,
            "HOOKLATCH_RECONCILE_MAX_PAGES": defaults.reconcile_max_pages,
            "HOOKLATCH_RECONCILE_MAX_WAIT_SECONDS": defaults.reconcile_max_wait_seconds,
        },
        "run": {
            "requests": ran["requests"],
            "pages": ran["pages"],
            "missing": ran["missing"],
            "fetched": ran["fetched"],
            "seconds": round(seconds, 2),
            "taken_by_relay_after_seconds": round(ran["started"] - measured.asked_at, 2),
            "listing_seconds": round(first_stored - ran["started"], 2),
            "storing_seconds": round(last_stored - first_stored, 2),
        },
        "workers": plan.workers,
        "handler_ms": plan.handler_seconds * 1000,
        "stored_per_second": round(ran["fetched"] / seconds, 1),
        "processed_seconds": round(last_processed - ran["started"], 2),
        "processed_per_second": round(plan.missing / (last_processed - ran["started"]), 1),
        "event_list_requests_at_fake_stripe": len(measured.pages),
        "live": {
            **live_figures(base, during, base_answers, answers, plan),
            "while_fetching_events": len(fetching),
            "while_fetching_wait_p99_ms": round(load.percentile(fetching, 99), 1),
        },
        "handler_runs": runs,
    }


def live_figures(
    base: list[float],
    during: list[float],
    base_answers: list[float],
    answers: list[float],
    plan: ReconcilePlan,
) -> dict[str, Any]:
    """Live deliveries alone and during the run (its start → its last event processed)."""

    def p(values: list[float], pct: float) -> float:
        return round(load.percentile(values, pct), 1)

    return {
        "rate": plan.live_rate,
        "baseline_events": len(base),
        "during_events": len(during),
        "baseline_wait_p50_ms": p(base, 50),
        "baseline_wait_p99_ms": p(base, 99),
        "baseline_wait_max_ms": p(base, 100),
        "during_wait_p50_ms": p(during, 50),
        "during_wait_p99_ms": p(during, 99),
        "during_wait_max_ms": p(during, 100),
        "wait_p99_ratio": round(load.percentile(during, 99) / load.percentile(base, 99), 2),
        "baseline_response_p99_ms": p(base_answers, 99),
        "during_response_p99_ms": p(answers, 99),
        "response_p99_ratio": round(
            load.percentile(answers, 99) / load.percentile(base_answers, 99), 2
        ),
    }


def summary(figures: dict[str, Any]) -> list[str]:
    ran, live = figures["run"], figures["live"]
    return [
        f"reconcile of {ran['missing']:,} missing events: {ran['requests']} requests, "
        f"{ran['pages']} pages, {ran['seconds']} s (listing {ran['listing_seconds']} s, "
        f"storing {ran['storing_seconds']} s); taken by the relay "
        f"{ran['taken_by_relay_after_seconds']} s after it was asked for",
        f"stored {figures['stored_per_second']:,}/s over the run; processed "
        f"{figures['processed_per_second']:,}/s (all {figures['processed_seconds']} s after "
        f"the run's start; {figures['workers']} worker, a {figures['handler_ms']:g} ms "
        "handler)",
        f"live events at {live['rate']:g}/s, handler wait p50 / p99 / max: "
        f"{live['baseline_wait_p50_ms']} / {live['baseline_wait_p99_ms']} / "
        f"{live['baseline_wait_max_ms']} ms alone ({live['baseline_events']}), "
        f"{live['during_wait_p50_ms']} / {live['during_wait_p99_ms']} / "
        f"{live['during_wait_max_ms']} ms during the run ({live['during_events']}); "
        f"p99 ratio {live['wait_p99_ratio']}",
        f"deliveries' response p99: {live['baseline_response_p99_ms']} ms alone, "
        f"{live['during_response_p99_ms']} ms during the run (ratio "
        f"{live['response_p99_ratio']})",
        f"each event's handler ran once ({figures['handler_runs']:,} runs); hand-set: "
        + ", ".join(f"{k}={v}" for k, v in figures["hand_set"].items()),
    ]


@click.command()
@click.option("--smoke", is_flag=True, help="A hundred events: checks, not figures.")
@click.option(
    "--handler-ms",
    type=float,
    default=None,
    help="The handler's fixed cost (a downstream call) instead of none; the results' file "
    "is then <date>-reconcile-handler<N>ms.json.",
)
def main(smoke: bool, handler_ms: float | None) -> None:
    plan = ReconcilePlan.for_run(smoke)
    name = "reconcile"
    if handler_ms is not None:
        plan = replace(plan, handler_seconds=handler_ms / 1000)
        name = f"reconcile-handler{handler_ms:g}ms"
    load_before = os.getloadavg()
    with prepared_bench(Plan.for_run(smoke), REDIS_URL) as bench:
        bench.log("reconcile: missing Stripe events fetched beside live deliveries")
        figures = run(bench, plan)
    results = {
        **results_head(smoke, load_before),
        "commit": head_commit(),
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "plan": asdict(plan),
        "figures": figures,
    }
    finish(results, summary(figures), name=name, smoke=smoke)


if __name__ == "__main__":
    main()
