"""A metric's value that fails the test when its series is not in the scrape.

``tests.support.metrics.sample`` answers 0 for a missing series, as for a counter not
counted yet: an assertion such as ``== 0`` or ``>= 0`` made with it passes whether the
series is exported or not. Assert with ``exported`` unless the absence is the point.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def exported(text: str, name: str, **labels: str) -> float:
    """The value of the first sample ``name`` with these labels (others ignored); an
    AssertionError, naming the labels the scrape has for ``name``, if there is none."""
    seen = []
    for family in text_string_to_metric_families(text):
        for item in family.samples:
            if item.name != name:
                continue
            if all(item.labels.get(k) == v for k, v in labels.items()):
                return float(item.value)
            seen.append(item.labels)
    raise AssertionError(f"no series {name} with {labels} in the scrape; it has {seen}")
