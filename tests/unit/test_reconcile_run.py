"""A reconcile run in progress, as a traceback's locals or a debugger would show it, and
what its error says."""

from __future__ import annotations

from datetime import UTC, datetime

from hooklatch.endpoints.models import Endpoint
from hooklatch.endpoints.ordering import OrderingSettings
from hooklatch.reconcile.runs import Run, RunRequest, Tally

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


def test_a_run_s_error_names_the_first_refused_deliveries_after_what_stopped_it():
    tally = Tally(error="rate limited: waiting would pass the run's 60 s")
    tally.refused = [f"guid-{n}: not_found (HTTP 404, Not Found)" for n in range(7)]
    said = tally.said()
    assert said is not None
    assert said.startswith("rate limited: waiting would pass the run's 60 s; ")
    assert "the provider refused to redeliver 7 deliveries" in said
    assert "guid-4: not_found (HTTP 404, Not Found); and 2 more" in said
    assert "guid-5" not in said
    assert Tally(refused=["guid-0: invalid (HTTP 422, Validation Failed)"]).said() == (
        "the provider refused to redeliver 1 delivery, which cannot be recovered by "
        "redelivery and was passed over: guid-0: invalid (HTTP 422, Validation Failed)"
    )
