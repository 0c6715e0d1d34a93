"""What hooklatch counts, for Prometheus (docs/architecture.md, "Metrics").

Every metric is defined here, on a registry of hooklatch's own. A process counts in its
memory, or, when ``PROMETHEUS_MULTIPROC_DIR`` names a directory, in files there that a
scrape adds up: gunicorn's workers (gunicorn.conf.py makes the directory), and a worker's
work horses (``serve_worker``), which exit after each job and would take their counts
with them.

Labels hold only bounded values: provider names, endpoint ids and secret fingerprints
of existing endpoints, and fixed outcome words. Never an event id or an event type.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client import values as prometheus_values
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar

from hooklatch.logs import one_line

log = logging.getLogger(__name__)

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
REGISTRY = CollectorRegistry()

# Outcomes of a delivery beside the refusal reasons (VerificationError.reason and the
# other errors' reasons: unknown_endpoint, body_too_large, store_unavailable...).
ACCEPTED = "accepted"
DUPLICATE = "duplicate"
HANDSHAKE = "handshake"
# An endpoint label for deliveries refused before an endpoint was found: the path is
# the sender's to choose, so it never becomes a label.
UNKNOWN = "unknown"

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
_LAG = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0)


class _Value(Protocol):
    """What prometheus_client asks of a metric's value (its MutexValue, or the class
    MultiProcessValue makes)."""

    def inc(self, amount: float) -> None: ...
    def set(self, value: float, timestamp: float | None = None) -> None: ...
    def set_exemplar(self, exemplar: Exemplar) -> None: ...
    def get(self) -> float: ...
    def get_exemplar(self) -> Exemplar | None: ...


class _DeferredValue:
    """A metric's value whose storage (memory or a multiprocess file) is chosen when it is
    first used, not when the metric is defined: this module is imported before a worker
    knows it will fork work horses (``use_multiprocess``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self._args, self._kwargs = args, kwargs
        self._value: _Value | None = None

    def _backend(self) -> _Value:
        if self._value is None:
            with _choice_lock:
                if self._value is None:
                    self._value = _value_class()(*self._args, **self._kwargs)
        return self._value

    def inc(self, amount: float) -> None:
        self._backend().inc(amount)

    def set(self, value: float, timestamp: float | None = None) -> None:
        self._backend().set(value, timestamp)

    def set_exemplar(self, exemplar: Exemplar) -> None:
        self._backend().set_exemplar(exemplar)

    def get(self) -> float:
        return float(self._backend().get())

    def get_exemplar(self) -> Exemplar | None:
        return self._backend().get_exemplar()


_choice_lock = threading.RLock()
_chosen: Callable[..., _Value] | None = None
# Set in a worker that forks a work horse per job (serve_worker): see _identity.
_horse_parent: int | None = None
# Set once something could not be counted (best_effort): logged once per process.
_counting_failed = False


@contextmanager
def best_effort() -> Iterator[None]:
    """Counting what has already happened (a delivery answered, a chunk committed, a
    cleanup pass done): a failure to count (the multiprocess directory removed, its disk
    full) is logged once per process and never undoes or fails the work counted."""
    global _counting_failed
    try:
        yield
    except Exception as exc:
        if not _counting_failed:
            _counting_failed = True
            log.error(
                "metrics: counting failed (%s); the work counted is unaffected", one_line(exc)
            )


def _identity() -> int | str:
    """Which files a process writes its counts to. A work horse writes to its worker's
    horse files (``<pid>h``), not to files of its own: a worker runs one horse at a
    time, and a pid per job would leave a new file behind with every job. Each horse
    reads the files afresh when it starts (its identity differs from its parent's)."""
    pid = os.getpid()
    if _horse_parent is not None and pid != _horse_parent:
        return f"{_horse_parent}h"
    return pid


def _value_class() -> Callable[..., _Value]:
    global _chosen
    with _choice_lock:
        if _chosen is None:
            if os.environ.get(MULTIPROC_DIR):
                _chosen = prometheus_values.MultiProcessValue(process_identifier=_identity)
            else:
                _chosen = prometheus_values.MutexValue
        return _chosen


# Read by prometheus_client each time a metric (or a labelled child) is made.
prometheus_values.ValueClass = _DeferredValue

DELIVERIES = Counter(
    "hooklatch_deliveries",
    "Deliveries received, by provider, endpoint and outcome (accepted, duplicate, "
    "handshake, or the refusal's reason).",
    ["provider", "endpoint", "outcome"],
    registry=REGISTRY,
)
INGEST_SECONDS = Histogram(
    "hooklatch_ingest_duration_seconds",
    "Time from a delivery's arrival to its answer, by provider and result "
    "(accepted, duplicate, refused).",
    ["provider", "result"],
    buckets=_FAST,
    registry=REGISTRY,
)
CONFLICTS = Counter(
    "hooklatch_event_id_conflicts",
    "Deliveries that repeated a stored event's id with another body, where the id is not "
    "signed, stored as events of their own and flagged (conflicts_with_event_id), by "
    "provider and endpoint.",
    ["provider", "endpoint"],
    registry=REGISTRY,
)
VERIFIED = Counter(
    "hooklatch_verified_deliveries",
    "Deliveries whose signature verified, by endpoint and the fingerprint of the secret "
    "that verified it (hooklatch endpoints show).",
    ["endpoint", "fingerprint"],
    registry=REGISTRY,
)
EVENTS = Counter(
    "hooklatch_events_handled",
    "Events whose handlers ran (or had none), by provider and outcome: processed, "
    "retried, ignored, dead. Counted once the outcome is committed.",
    ["provider", "outcome"],
    registry=REGISTRY,
)
REPLAYS = Counter(
    "hooklatch_replays",
    "Replays run, by outcome: succeeded, failed, stale. Counted once the outcome is committed; "
    "a replay's handlers are not in hooklatch_events_handled.",
    ["outcome"],
    registry=REGISTRY,
)
HANDLER_SECONDS = Histogram(
    "hooklatch_handler_duration_seconds",
    "Time an event's handlers ran, by provider.",
    ["provider"],
    buckets=_SLOW,
    registry=REGISTRY,
)
START_LAG = Histogram(
    "hooklatch_event_start_lag_seconds",
    "Time from an event becoming due (stored, or its retry due) to its handlers starting; "
    "attempt is first or retry.",
    ["attempt"],
    buckets=_LAG,
    registry=REGISTRY,
)
CLEANUP_ROWS = Counter(
    "hooklatch_cleanup_rows",
    "Rows cleanup changed, by action: pruned (payloads), deleted (events), "
    "deleted_refusals, deleted_heartbeats, deleted_activity, deleted_batches, deleted_audit, "
    "deleted_keys, deleted_sessions, deleted_token_failures.",
    ["action"],
    registry=REGISTRY,
)
CLEANUP_BATCH_SECONDS = Histogram(
    "hooklatch_cleanup_batch_seconds",
    "Duration of one cleanup batch (one transaction).",
    buckets=_FAST,
    registry=REGISTRY,
)
CLEANUP_OLDEST_EXPIRED_SECONDS = Gauge(
    "hooklatch_cleanup_oldest_expired_seconds",
    "How long past its retention clock the oldest row cleanup has not reached yet is "
    "(0: nothing is waiting).",
    multiprocess_mode="mostrecent",
    registry=REGISTRY,
)

FORWARDS = Counter(
    "hooklatch_forwards",
    "Forwards sent to a destination, by destination and outcome: delivered (acknowledged; "
    "duplicate too when the destination said it held it already), failed (to be tried "
    "again), dead (its last attempt failed). Counted once the outcome is committed.",
    ["destination", "outcome"],
    registry=REGISTRY,
)
FORWARD_SECONDS = Histogram(
    "hooklatch_forward_latency_seconds",
    "Time from a forward being written (its event's processing) to the destination "
    "acknowledging it, by destination.",
    ["destination"],
    buckets=_LAG,
    registry=REGISTRY,
)

# How the worker maps an event's outcome (its new status) to the label.
EVENT_OUTCOMES = {
    "processed": "processed",
    "pending": "retried",
    "ignored": "ignored",
    "dead": "dead",
}


class DeliveryTally:
    """What the metrics say of one delivery, learnt while it is answered: the endpoint's
    provider once the endpoint is found (until then neither is a label: the path is the
    sender's to choose), the fingerprint of the secret that verified it, the outcome."""

    def __init__(self) -> None:
        self.provider: str | None = None
        self.fingerprint: str | None = None
        self.outcome = "internal_error"
        self.conflicts = 0  # events stored as conflicts (hooklatch.ingest.store)

    def count(self, endpoint_id: str, seconds: float) -> None:
        """Count the delivery, once its answer is settled (a stored event committed): a
        failure to count never changes the answer."""
        with best_effort():
            self._count(endpoint_id, seconds)

    def _count(self, endpoint_id: str, seconds: float) -> None:
        provider = self.provider or UNKNOWN
        endpoint = endpoint_id if self.provider else UNKNOWN
        DELIVERIES.labels(provider, endpoint, self.outcome).inc()
        stored = self.outcome in (ACCEPTED, DUPLICATE)
        INGEST_SECONDS.labels(provider, self.outcome if stored else "refused").observe(seconds)
        if self.fingerprint is not None:
            VERIFIED.labels(endpoint, self.fingerprint).inc()
        if self.conflicts:
            CONFLICTS.labels(provider, endpoint).inc(self.conflicts)


class EventTally:
    """A transaction's handled events, counted only once it has committed: a rolled back
    chunk runs again, and would otherwise be counted twice."""

    def __init__(self) -> None:
        self._seen: list[tuple[str, str, float | None, str, float]] = []

    def add(
        self,
        *,
        provider: str,
        status: str,
        handler_seconds: float | None,
        first_attempt: bool,
        due: datetime,
        started: datetime,
    ) -> None:
        lag = max(0.0, (started - due).total_seconds())
        attempt = "first" if first_attempt else "retry"
        self._seen.append(
            (provider, EVENT_OUTCOMES.get(status, status), handler_seconds, attempt, lag)
        )

    def record(self) -> None:
        """Count them, once committed: a failure to count never fails the chunk."""
        with best_effort():
            for provider, outcome, seconds, attempt, lag in self._seen:
                EVENTS.labels(provider, outcome).inc()
                if seconds is not None:
                    HANDLER_SECONDS.labels(provider).observe(seconds)
                START_LAG.labels(attempt).observe(lag)
        self._seen.clear()


def use_multiprocess(directory: str, *, horses: bool = False) -> None:
    """Count in files under ``directory`` from now on (before anything is counted), and
    with ``horses``, give this process's forked work horses one set of files."""
    global _horse_parent
    with _choice_lock:
        if _chosen is not None and os.environ.get(MULTIPROC_DIR) != directory:
            raise RuntimeError("metrics were counted before their storage was chosen")
        os.environ[MULTIPROC_DIR] = directory
        if horses:
            _horse_parent = os.getpid()


def collectors(*extra: Collector) -> CollectorRegistry:
    """What a scrape of this process reads: every process's files in multiprocess mode,
    else this process's counts; and ``extra`` (the database gauges)."""
    registry = CollectorRegistry()
    directory = os.environ.get(MULTIPROC_DIR)
    if directory:
        MultiProcessCollector(registry, path=directory)
    else:
        registry.register(REGISTRY)
    for collector in extra:
        registry.register(collector)
    return registry


def serve(port: int | None, *extra: Collector, address: str, setting: str) -> None:
    """Serve this process's metrics on ``address``:``port`` (``setting`` names the port's
    setting), if set, from a thread: relays and workers, which have no HTTP server of
    their own. A port that cannot be had stops the process with one line naming the
    setting: a supervisor starting it again would only repeat it."""
    if port is None:
        return
    try:
        start_http_server(port, addr=address, registry=collectors(*extra))
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            why += " (by another process: each relay and worker of a host needs a port of its own)"
        where = f"[{address}]" if ":" in address else address
        raise SystemExit(f"cannot serve metrics on {where}:{port} ({setting}): {why}") from None
    log.info("metrics served on %s port %d", address, port)


def serve_worker(port: int | None, *, address: str, setting: str) -> None:
    """A worker's metrics: its work horses count in files, in ``PROMETHEUS_MULTIPROC_DIR``
    or else a directory of this process's own, removed when it exits. With the directory
    given, they share one set of files whether or not this process serves a port (a
    scrape elsewhere reads them): otherwise each horse would leave a set of its own."""
    directory = os.environ.get(MULTIPROC_DIR)
    if port is None:
        if directory:
            use_multiprocess(directory, horses=True)
        return
    if not directory:
        directory = tempfile.mkdtemp(prefix="hooklatch-metrics-")
        owner = os.getpid()
        atexit.register(_remove_if_owner, directory, owner)
    use_multiprocess(directory, horses=True)
    serve(port, address=address, setting=setting)


def _remove_if_owner(directory: str, owner: int) -> None:
    if os.getpid() == owner:
        shutil.rmtree(directory, ignore_errors=True)


def timer() -> Callable[[], float]:
    """Seconds since this call, from a monotonic clock."""
    started = time.perf_counter()
    return lambda: time.perf_counter() - started
