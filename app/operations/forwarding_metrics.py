"""The destinations' gauges, per destination by name (hooklatch.operations.forwarding),
built from the database gauges' last read (hooklatch.operations.backlog).

Every process that serves the database gauges reports the same values (they are read
from the database, not counted): aggregate with ``max by (destination)``, not ``sum``.
What was sent is counted by the relays that send (hooklatch_forwards_total,
hooklatch_forward_latency_seconds: hooklatch.metrics).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from hooklatch.operations.forwarding import DestinationSignals

LABELS = ["destination"]
GAUGES: dict[str, tuple[str, Callable[[DestinationSignals], float]]] = {
    "hooklatch_forwards_pending": (
        "Forwards waiting to be sent to the destination (retries not due yet included).",
        lambda item: item.pending,
    ),
    "hooklatch_forwards_dead": (
        "Forwards whose last attempt failed: sent again only by a replay.",
        lambda item: item.dead,
    ),
    "hooklatch_forward_oldest_pending_seconds": (
        "Age of the destination's oldest waiting forward (0: none waits).",
        lambda item: item.oldest_pending_seconds,
    ),
    "hooklatch_destination_paused": (
        "1 while the destination is paused (its forwards are recorded, none is sent), else 0.",
        lambda item: float(item.paused),
    ),
}


def forwarding_families(destinations: Sequence[DestinationSignals]) -> Iterator[Metric]:
    """Each family, named in the scrape even with no destination, as every other
    hooklatch metric is; a series per destination."""
    for name, (documentation, value) in GAUGES.items():
        family = GaugeMetricFamily(name, f"{documentation} By destination.", labels=LABELS)
        for item in destinations:
            family.add_metric([item.name], float(value(item)))
        yield family
