"""Zoom's conformance cases, run against the provider itself."""

from tests.support.providers.zoom import ZoomCase


class TestZoomConformance(ZoomCase):
    pass
