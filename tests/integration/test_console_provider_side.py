"""An endpoint's side at its provider in the console: its webhook there with drift shown as
a warning, its credential set through password fields and never shown, registering,
checking and removing it at the provider, and reconcile runs asked of the relays, shown
as requested until one takes them. What the provider or a request said is escaped."""

from __future__ import annotations

from datetime import UTC, datetime
from html import unescape

from hooklatch.reconcile.models import ProviderHook, ReconcileRun, ReconcileState
from tests.support.console import csrf_of, signed_in
from tests.support.database import count
from tests.support.pipeline import make_endpoint

NO_API = "linear"
PLANTED = '<script>alert("x")</script>'


def page_of(client, endpoint: str) -> str:
    answer = client.get(f"/admin/console/endpoints/{endpoint}")
    assert answer.status_code == 200
    return answer.get_data(as_text=True)


def section(page: str) -> str:
    """The page's "At the provider" section."""
    start = page.index('id="provider-side"')
    return page[start : page.index("</section>", start)]


def test_a_provider_without_an_api_says_so_and_offers_no_form(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime, NO_API, name="issues", secrets=["lin_wh_secret_1"])

    shown = section(page_of(client, endpoint))

    assert "At the provider" in shown
    assert "cannot reach linear's API" in shown
    assert "<form" not in shown


def plant(runtime, endpoint: str) -> None:
    """A webhook read back with drift, a run asked for, and a run that failed: as a relay
    and the provider left them, with the provider's and a requester's words in them."""
    now = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
    with runtime.session_factory.begin() as session:
        session.add(
            ProviderHook(
                endpoint_id=endpoint,
                hook_id="we_1Planted",
                event_types=["invoice.paid"],
                registered_at=now,
                seen_url=f"https://elsewhere.example/{PLANTED}",
                seen_event_types=["invoice.paid", PLANTED],
                seen_enabled=False,
                drift="disabled,url_changed,event_types_changed",
                checked_at=now,
            )
        )
        session.add(
            ReconcileState(
                endpoint_id=endpoint,
                cursor=now,
                requested={"trigger": "api", "requested_by": PLANTED, "dry_run": True},
                missing_total=7,
                present_total=3,
                fetched_total=7,
                redeliveries_total=0,
                requests_total=4,
                runs_total=2,
                errors_total={"rate_limited": 2},
            )
        )
        session.add(
            ReconcileRun(
                endpoint_id=endpoint,
                trigger="schedule",
                requested_by="relay",
                status="cut_short",
                stop_reason="rate_limited",
                error=f"the provider said {PLANTED}",
                started_at=now,
                listed=10,
                missing=7,
                present=3,
                fetched=7,
                requests=4,
                pages=2,
            )
        )


def test_drift_a_run_asked_for_and_a_run_cut_short_are_shown_escaped(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime, name="billing")
    plant(runtime, endpoint)

    shown = section(page_of(client, endpoint))
    listed = client.get("/admin/console/endpoints").get_data(as_text=True)

    assert PLANTED not in shown and "&lt;script&gt;" in shown
    assert 'class="warning" id="drift"' in shown
    assert "stripe has disabled it" in shown
    assert "it delivers to another URL than this endpoint" in shown
    assert "its event types differ from those asked for" in shown
    assert '<span class="status requested">requested</span>' in shown
    run = shown.split('<tr class="run">')[1].split("</tr>")[0]
    assert "cut short" in run and "rate_limited" in run
    cells = [unescape(c) for c in run.split('<td class="n">')[1:]]
    assert [c.split("<")[0] for c in cells] == ["10", "7", "3", "7", "0", "4 / 2"]
    assert "drift: disabled, url_changed, event_types_changed" in listed


def test_a_form_posted_without_its_csrf_token_changes_nothing(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime, name="billing")
    csrf = csrf_of(client.get(f"/admin/console/endpoints/{endpoint}"))

    refused = client.post(
        f"/admin/console/endpoints/{endpoint}/credential",
        data={"credential-api_key": "rk_test_no_csrf"},
    )
    wrong = client.post(
        f"/admin/console/endpoints/{endpoint}/reconcile",
        data={"dry_run": "false", "csrf_token": csrf[::-1]},
    )

    assert refused.status_code == wrong.status_code == 400
    assert "rk_test_no_csrf" not in refused.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM reconcile_states") == 0
    assert count(runtime, "SELECT count(*) FROM audit_log") == 0


def test_a_run_asked_for_without_a_credential_is_refused_with_a_message(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime, name="billing")
    csrf = csrf_of(client.get(f"/admin/console/endpoints/{endpoint}"))

    answer = client.post(
        f"/admin/console/endpoints/{endpoint}/reconcile",
        data={"dry_run": "true", "csrf_token": csrf},
        follow_redirects=True,
    )

    assert answer.status_code == 200
    assert "has no credential for its provider" in answer.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM reconcile_states") == 0
