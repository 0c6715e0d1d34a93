"""The reconcile's metrics, per endpoint with a credential (hooklatch.reconcile.signals),
built from the database gauges' last read (hooklatch.operations.backlog).

The counters are totals kept in the database, so every web process reports the same
value and a restart does not reset them: aggregate with ``max by (endpoint, provider)``,
not ``sum``. They are served only where a scrape needs the token (the web's /metrics):
their labels name endpoints.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from hooklatch.reconcile.signals import DRIFTS, ENDED, EndpointSignals

LABELS = ["endpoint", "provider"]
COUNTERS = {
    "missing": "Events a reconcile found the provider had sent (or tried to send) and "
    "hooklatch had not stored: each one a delivery ingest lost.",
    "present": "Events a reconcile found at the provider that hooklatch had stored already "
    "(a late delivery, or one that arrived while the provider counted it failed).",
    "fetched": "Events a reconcile fetched from the provider's API and stored (pull).",
    "redeliveries": "Deliveries a reconcile asked the provider to send again (push).",
    "requests": "Requests a reconcile made to the provider's API, dry runs included.",
    "runs": "Reconcile runs that ended, not counting dry runs.",
}


def reconcile_families(
    endpoints: Sequence[EndpointSignals], *, interval: float
) -> Iterator[Metric]:
    """The families, each named in the scrape even with no endpoint to report, as every
    other hooklatch metric is. ``interval``: HOOKLATCH_RECONCILE_INTERVAL_SECONDS."""
    yield from _counters(endpoints)
    yield _last_success(endpoints)
    yield _last_status(endpoints)
    yield _schedule(endpoints, interval)
    yield _drift(endpoints)


def _counters(endpoints: Sequence[EndpointSignals]) -> Iterator[Metric]:
    for name, documentation in COUNTERS.items():
        counter = CounterMetricFamily(
            f"hooklatch_reconcile_{name}", f"{documentation} By endpoint.", labels=LABELS
        )
        for item in endpoints:
            counter.add_metric(_labels(item), item.totals[name])
        yield counter
    errors = CounterMetricFamily(
        "hooklatch_reconcile_api_errors",
        "Errors the provider's API answered a reconcile with, dry runs included, by "
        "endpoint and reason (unauthorized, forbidden, rate_limited, server_error...; "
        "other: a plugin's own).",
        labels=[*LABELS, "reason"],
    )
    for item in endpoints:
        for reason, count in item.errors.items():
            errors.add_metric([*_labels(item), reason], count)
    yield errors


def _last_success(endpoints: Sequence[EndpointSignals]) -> Metric:
    success = GaugeMetricFamily(
        "hooklatch_reconcile_last_success_timestamp_seconds",
        "When the endpoint's last reconcile (not a dry run) finished without stopping short.",
        labels=LABELS,
    )
    for item in endpoints:
        if item.last_success_at is not None:
            success.add_metric(_labels(item), item.last_success_at.timestamp())
    return success


def _last_status(endpoints: Sequence[EndpointSignals]) -> Metric:
    return _states(
        "hooklatch_reconcile_last_run_status",
        "1 for how the endpoint's last ended reconcile (not a dry run) ended, 0 for the "
        "others: finished, cut_short (a budget, a rate limit or an API error stopped it; "
        "the next run resumes), failed, interrupted (its process died).",
        "status",
        ENDED,
        endpoints,
        lambda item: None if item.last_status is None else {item.last_status},
    )


def _schedule(endpoints: Sequence[EndpointSignals], interval: float) -> Metric:
    schedule = GaugeMetricFamily(
        "hooklatch_reconcile_interval_seconds",
        "Seconds between the scheduled reconciles of the endpoint; no series where none "
        "are scheduled (HOOKLATCH_RECONCILE_INTERVAL_SECONDS is 0, or the endpoint is "
        "disabled).",
        labels=LABELS,
    )
    if interval > 0:
        for item in endpoints:
            if item.enabled:
                schedule.add_metric(_labels(item), interval)
    return schedule


def _drift(endpoints: Sequence[EndpointSignals]) -> Metric:
    return _states(
        "hooklatch_provider_webhook_drift",
        "1 for each way the endpoint's webhook at the provider differed from what hooklatch "
        "expects when last read back (disabled, url_changed, event_types_changed, "
        "deleted), 0 for the others; no series for an endpoint without a webhook there.",
        "drift",
        DRIFTS,
        endpoints,
        lambda item: item.drift,
    )


def _states(
    name: str,
    documentation: str,
    label: str,
    values: Sequence[str],
    endpoints: Sequence[EndpointSignals],
    held: Callable[[EndpointSignals], Collection[str] | None],
) -> Metric:
    """A series per endpoint and each of ``values``: 1 for those that hold, 0 for the
    others, so each exists before it changes; none for an endpoint where ``held`` is None."""
    family = GaugeMetricFamily(name, documentation, labels=[*LABELS, label])
    for item in endpoints:
        holding = held(item)
        if holding is not None:
            for value in values:
                family.add_metric([*_labels(item), value], float(value in holding))
    return family


def _labels(item: EndpointSignals) -> list[str]:
    return [item.endpoint_id, item.provider]
