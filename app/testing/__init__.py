"""The provider conformance kit, for plugin authors (docs/plugins.md)::

    from hooklatch.testing import ProviderConformance, json_body

Run by pytest (hooklatch's pytest plugin, ``pip install hooklatch[testing]``) or by
``python -m hooklatch.testing <provider>``, which needs no pytest.
"""

from hooklatch.testing.checks import CHECKS, Check, Result, checks_for, run_checks
from hooklatch.testing.conformance import (
    ConformanceFailure,
    Outcome,
    ProviderConformance,
    json_body,
)

__all__ = [
    "CHECKS",
    "Check",
    "ConformanceFailure",
    "Outcome",
    "ProviderConformance",
    "Result",
    "checks_for",
    "json_body",
    "run_checks",
]
