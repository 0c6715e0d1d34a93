"""An endpoint's side at its provider in the console: its webhook there with drift shown as
a warning, its credential set through password fields and never shown, registering,
checking and removing it at the provider, and reconcile runs asked of the relays, shown
as requested until one takes them. What the provider or a request said is escaped."""

from __future__ import annotations

import logging
import re
from collections import Counter
from datetime import UTC, datetime
from html import unescape

from hooklatch.reconcile.models import ProviderHook, ReconcileRun, ReconcileState
from hooklatch.workers.relay.reconcile import ReconcileRunner
from tests.support.console import csrf_of, page_of, section, signed_in
from tests.support.database import count
from tests.support.pipeline import drain, make_endpoint, runs_of
from tests.support.tokens import GITHUB_TOKEN as TOKEN

NO_API = "linear"
PLANTED = '<script>alert("x")</script>'
SCOPE = "repos/acme/shop"


class Console:
    """A signed-in console, posting an endpoint's forms with the page's CSRF token."""

    def __init__(self, app, endpoint):
        self.client, _ = signed_in(app)
        self.endpoint = endpoint

    def page(self):
        return page_of(self.client, self.endpoint)

    def post(self, form, **fields):
        csrf = csrf_of(self.client.get(f"/admin/console/endpoints/{self.endpoint}"))
        answer = self.client.post(
            f"/admin/console/endpoints/{self.endpoint}/{form}",
            data={**fields, "csrf_token": csrf},
            follow_redirects=True,
        )
        assert answer.status_code == 200
        return answer.get_data(as_text=True)


def flash_of(page):
    found = re.search(r'<p class="flash (\w+)">(.*?)</p>', page, re.S)
    assert found, "no message on the page"
    return found[1], unescape(found[2])


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
    endpoint, _ = make_endpoint(runtime, "github", name="repo")
    plant(runtime, endpoint)

    shown = section(page_of(client, endpoint))
    listed = client.get("/admin/console/endpoints").get_data(as_text=True)

    assert PLANTED not in shown and "&lt;script&gt;" in shown
    assert 'class="warning" id="drift"' in shown
    assert "github has disabled it" in shown
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
    endpoint, _ = make_endpoint(runtime, name="billing")

    page = Console(app, endpoint).post("reconcile", dry_run="true")

    assert flash_of(page) == (
        "error",
        f"endpoint {endpoint} has no credential for its provider's API",
    )
    assert count(runtime, "SELECT count(*) FROM reconcile_states") == 0


# -- against FakeGitHub ----------------------------------------------------------------


def registered(app, runtime, github):
    """A GitHub endpoint with its credential set and registered, through the console."""
    endpoint, _ = make_endpoint(runtime, "github", name="shop", secrets=["gh-hook-secret-1"])
    console = Console(app, endpoint)
    console.post("credential", **{"credential-token": TOKEN, "api_url": github.url, "scope": SCOPE})
    page = console.post("register", event_types="push, issues")
    assert flash_of(page)[0] == "ok", flash_of(page)
    [hook_id] = github.hooks
    return console, hook_id


def test_the_credential_is_typed_into_password_fields_and_never_shown(app, runtime, github, caplog):
    caplog.set_level(logging.DEBUG)
    endpoint, _ = make_endpoint(runtime, "github", name="shop", secrets=["gh-hook-secret-1"])
    console = Console(app, endpoint)
    form = section(console.page())
    assert re.findall(r'<input name="credential-token"[^>]*>', form) == [
        '<input name="credential-token" type="password" autocomplete="off">'
    ]

    stored = console.post(
        "credential", **{"credential-token": TOKEN, "api_url": github.url, "scope": SCOPE}
    )
    fingerprint = section(stored).split("Fingerprint</dt><dd><code>")[1].split("<")[0]
    github.add_token(TOKEN + "-rotated")
    rotated = console.post("credential", **{"credential-token": TOKEN + "-rotated"})
    removed = console.post("credential/remove")

    assert flash_of(stored)[0] == "ok" and len(fingerprint) == 12
    assert "<code>token</code>" in section(stored)
    assert fingerprint not in section(rotated) and "Rotate the credential" in section(rotated)
    assert flash_of(removed)[0] == "ok" and "None: hooklatch does not call" in section(removed)
    with runtime.engine.connect() as connection:
        audit = str(connection.exec_driver_sql("SELECT actor, details FROM audit_log").all())
    assert "Grace (console)" in audit
    for shown in (stored, rotated, removed, audit, caplog.text):
        assert TOKEN not in shown


def test_registering_with_github_checking_and_removing_it_there(app, runtime, github):
    console, hook_id = registered(app, runtime, github)
    hook = github.hook(hook_id)

    shown = section(console.page())
    checked = console.post("check")
    github.change_hook(hook_id, active=False)
    drifted = console.post("check")
    listed = console.client.get("/admin/console/endpoints").get_data(as_text=True)
    removed = console.post("unregister")

    assert (hook.events, hook.secret) == (["push", "issues"], "gh-hook-secret-1")
    assert f"<code>{hook_id}</code> in <code>{SCOPE}</code>" in shown
    assert "<code>push</code>, <code>issues</code>" in shown
    assert "Check now" in shown and "Remove from github" in shown
    assert "gh-hook-secret-1" not in shown
    assert flash_of(checked) == ("ok", "Read back: the provider holds what hooklatch expects.")
    assert flash_of(drifted)[0] == "error"
    assert 'id="drift"' in section(drifted) and "github has disabled it" in section(drifted)
    assert '<span class="badge bad">no</span>' in section(drifted)
    assert "drift: disabled" in listed
    assert flash_of(removed)[0] == "ok" and github.hooks == {}
    assert "Register with github" in section(removed)


def test_github_s_refusal_is_the_page_s_message(app, runtime, github):
    endpoint, _ = make_endpoint(runtime, "github", name="shop", secrets=["gh-hook-secret-1"])
    console = Console(app, endpoint)
    console.post("credential", **{"credential-token": TOKEN, "api_url": github.url, "scope": SCOPE})
    github.revoke(TOKEN)

    page = console.post("register", event_types="push")

    tone, message = flash_of(page)
    assert tone == "error" and "Bad credentials" in message
    assert TOKEN not in page and github.hooks == {}


def test_a_run_asked_in_the_console_is_requested_until_a_relay_runs_it(
    app, runtime, router, github
):
    ran = runs_of(router, "github")
    console, hook_id = registered(app, runtime, github)
    lost = [github.deliver(hook_id, "push", {"ref": f"refs/heads/l{n}"}, fail=True) for n in (1, 2)]

    asked = console.post("reconcile", dry_run="false")
    ReconcileRunner(runtime).once()
    done = section(console.page())
    console.post("reconcile", dry_run="true")
    ReconcileRunner(runtime).once()
    dry = section(console.page())

    assert flash_of(asked)[0] == "ok"
    waiting = section(asked)
    assert '<span class="status requested">requested</span>' in waiting
    assert "Grace (console)" in waiting and '<tr class="run">' not in waiting
    assert "requested</span>" not in done
    run = done.split('<tr class="run">')[1].split("</tr>")[0]
    assert '<span class="status finished">finished</span>' in run and "(console)" in run
    cells = [c.split("<")[0] for c in run.split('<td class="n">')[1:]]
    assert cells == ["2", "2", "0", "0", "2", "3 / 1"]  # listed ... redeliveries, requests
    assert 'Found missing</dt><dd class="n">2' in done
    newest = dry.split('<tr class="run">')[1].split("</tr>")[0]
    assert '<span class="badge">dry run</span>' in newest
    drain(runtime)
    assert len(ran) == 2 and set(Counter(ran).values()) == {1}
    assert {d.guid for d in github.redeliveries(hook_id)} == set(lost)
