"""A reconcile run in progress, as a traceback's locals or a debugger would show it."""

from __future__ import annotations

from datetime import UTC, datetime

from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import OrderingSettings
from hooklatch.reconcile.runs import Run, RunRequest

SECRET_OPTION = "opt-secret-7c1e0b"


def test_a_run_s_repr_shows_no_decrypted_option():
    run = Run(
        id=1,
        endpoint=Endpoint(id="ep_1", provider="shopify", name="shop"),
        reach=None,  # type: ignore[arg-type]
        request=RunRequest(trigger="cli", requested_by="test"),
        since=datetime(2026, 1, 1, tzinfo=UTC),
        url="https://hooks.example.com/hooks/ep_1",
        options={"client_secret": SECRET_OPTION},
        ordering=OrderingSettings(),
    )
    assert SECRET_OPTION not in repr(run)
