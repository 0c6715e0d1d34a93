"""The provider conformance kit, for plugin authors (docs/plugins.md)::

from hooklatch.testing import ProviderConformance, json_body
"""

from hooklatch.testing.conformance import Outcome, ProviderConformance, json_body

__all__ = ["Outcome", "ProviderConformance", "json_body"]
