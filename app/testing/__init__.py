"""The provider conformance kit, for plugin authors (docs/plugins.md)::

    from hooklatch.testing import ProviderConformance, json_body

Run by pytest (``pip install hooklatch[testing]``, and hooklatch's pytest plugin enabled
in a conftest.py: ``pytest_plugins = ["hooklatch.testing.plugin"]``) or by
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
