"""The console's Destinations: the list and a destination's page render what each
destination is and has waiting, never its secret settings, and escape what its name and
errors hold; its dead forwards are listed newest first a page at a time; pausing,
resuming and replaying dead forwards (after a dry run) are forms that need the page's
CSRF token, and each change is in the audit log.

Destinations are seeded directly (tests.support.forwarding): what the console shows of
them is the subject here, not how a kind of destination checks its settings."""

from __future__ import annotations

import re
from datetime import timedelta

from sqlalchemy import text

from hooklatch.admin.console.destinations import DEAD_PAGE
from tests.support.console import csrf_of, signed_in
from tests.support.database import count
from tests.support.forwarding_rows import (
    PASSWORD,
    SHOWN,
    seed_destination,
    seed_event,
    seed_forward,
    seed_forwards,
)
from tests.support.pipeline import make_endpoint

XSS_NAME = '<script>alert("name")</script>'
XSS_ERROR = '<img src=x onerror=alert("error")> refused\n\x1b[31m'


def audit_actions(runtime):
    with runtime.engine.connect() as c:
        rows = c.execute(text("SELECT actor, action, target FROM audit_log ORDER BY id"))
        return [tuple(row) for row in rows]


def status_of(runtime, forward):
    with runtime.engine.connect() as c:
        return c.execute(text("SELECT status FROM forwards WHERE id = :f"), {"f": forward}).scalar()


def test_the_list_shows_each_destination_and_never_a_secret(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime, name="billing")
    orders = seed_destination(
        runtime,
        "orders",
        rate_limit=2.5,
        provider="stripe",
        types=("invoice.*", "charge.*"),
        delivered=1234,
        failed=7,
        last_error="HTTP 503",
    )
    seed_destination(runtime, "archive", kind="nats", paused=True)
    seed_forwards(runtime, orders, endpoint, {"pending": 3}, age=timedelta(minutes=20))
    seed_forwards(runtime, orders, endpoint, {"dead": 2}, prefix="dead")

    page = client.get("/admin/console/destinations")

    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert 'href="/admin/console/destinations"' in html  # the navigation's entry
    row = next(r for r in html.split('<tr class="destination">')[1:] if ">orders</a>" in r)
    cells = dict(re.findall(r'<td class="n (\w+)">(?:<span[^>]*>)?(\d+)', row))
    assert cells == {"pending": "3", "dead": "2", "delivered": "1234", "failed": "7"}
    assert f"<code>{SHOWN}</code>" in row
    assert (
        "provider <code>stripe</code>; types <code>invoice.*</code>, <code>charge.*</code>" in row
    )
    assert "2.5/s" in row and "20.0 min" in row and "HTTP 503" in row and "sending" in row
    archive = next(r for r in html.split('<tr class="destination">')[1:] if ">archive</a>" in r)
    assert "paused" in archive and "every event" in archive
    assert PASSWORD not in html
    for path in (
        f"/admin/console/destinations/{orders}",
        f"/admin/console/destinations/{orders}/replay",
    ):
        assert PASSWORD not in client.get(path).get_data(as_text=True)


def test_a_name_and_errors_that_look_like_html_are_escaped(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    shady = seed_destination(runtime, XSS_NAME, last_error=XSS_ERROR)
    event = seed_event(runtime, endpoint, "evt_shady", event_type='<b onmouseover="x">t</b>')
    seed_forward(runtime, shady, event, status="dead", attempts=25, last_error=XSS_ERROR)

    pages = [
        client.get(path).get_data(as_text=True)
        for path in (
            "/admin/console/destinations",
            f"/admin/console/destinations/{shady}",
            f"/admin/console/destinations/{shady}/replay",
        )
    ]

    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "&lt;script&gt;alert(&#34;name&#34;)&lt;/script&gt;" in html
        assert "\x1b" not in html
    assert "&lt;img src=x onerror=alert(&#34;error&#34;)&gt; refused\\n\\x1b[31m" in pages[1]
    assert "<b onmouseover" not in pages[1] and "&lt;b onmouseover=" in pages[1]


def test_dead_forwards_are_listed_newest_first_a_page_at_a_time(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    orders = seed_destination(runtime, "orders")
    events = [seed_event(runtime, endpoint, f"evt_{n}") for n in range(DEAD_PAGE + 3)]
    for event in events:
        seed_forward(runtime, orders, event, status="dead", attempts=25, last_error="refused")
    seed_forwards(runtime, orders, endpoint, {"pending": 1, "delivered": 1})

    def listed(html):
        return [
            int(n)
            for n in re.findall(
                r'<tr class="forward"><td class="n"><a href="/admin/console/events/(\d+)"', html
            )
        ]

    first = client.get(f"/admin/console/destinations/{orders}").get_data(as_text=True)
    assert listed(first) == events[::-1][:DEAD_PAGE]
    older = re.search(r'href="(/admin/console/destinations/[^"]+\?before=\d+)">Older', first)
    assert older
    second = client.get(older[1].replace("&amp;", "&")).get_data(as_text=True)
    assert listed(second) == events[::-1][DEAD_PAGE:]
    assert "Older dead forwards" not in second
    assert '<td class="text">refused</td>' in second
    assert client.get(f"/admin/console/destinations/{orders}?before=x").status_code == 200
    assert client.get("/admin/console/destinations/dst_none").status_code == 404


def test_pause_and_resume_need_the_csrf_token_and_are_audited(app, runtime):
    client, _ = signed_in(app)
    orders = seed_destination(runtime, "orders")
    page = client.get(f"/admin/console/destinations/{orders}")
    path = f"/admin/console/destinations/{orders}/paused"

    refused = client.post(path, data={"paused": "true"})
    assert refused.status_code == 400
    assert "This form was not sent by this console" in refused.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM destinations WHERE paused") == 0

    paused = client.post(path, data={"paused": "true", "csrf_token": csrf_of(page)})
    assert paused.status_code == 302 and paused.location == f"/admin/console/destinations/{orders}"
    shown = client.get(paused.location).get_data(as_text=True)
    assert "Paused: its forwards are recorded" in shown and ">Resume</button>" in shown
    assert count(runtime, "SELECT count(*) FROM destinations WHERE paused") == 1
    again = client.post(path, data={"paused": "true", "csrf_token": csrf_of(page)})
    assert "It was paused already." in client.get(again.location).get_data(as_text=True)

    client.post(path, data={"paused": "false", "csrf_token": csrf_of(page)})
    assert count(runtime, "SELECT count(*) FROM destinations WHERE paused") == 0
    assert audit_actions(runtime) == [
        ("Grace (console)", "destination.paused", orders),
        ("Grace (console)", "destination.resumed", orders),
    ]


def test_dead_forwards_are_replayed_after_a_dry_run_with_a_reason(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    orders = seed_destination(runtime, "orders", paused=True)
    dead = seed_forwards(runtime, orders, endpoint, {"dead": 3})
    other = seed_destination(runtime, "other")
    untouched = seed_forwards(runtime, other, endpoint, {"dead": 1}, prefix="other")
    page = client.get(f"/admin/console/destinations/{orders}").get_data(as_text=True)
    assert f'href="/admin/console/destinations/{orders}/replay"' in page

    plan = client.get(f"/admin/console/destinations/{orders}/replay")

    html = plan.get_data(as_text=True)
    assert plan.status_code == 200
    assert "<strong>3 dead forwards</strong> would be sent again" in html
    assert "once it is resumed (it is paused)" in html
    assert [status_of(runtime, f) for f in dead] == ["dead"] * 3  # a dry run changes nothing
    assert audit_actions(runtime) == []

    path = f"/admin/console/destinations/{orders}/replay"
    assert client.post(path, data={"reason": "receiver fixed"}).status_code == 400
    no_reason = client.post(path, data={"reason": " ", "csrf_token": csrf_of(plan)})
    assert no_reason.location == path
    assert [status_of(runtime, f) for f in dead] == ["dead"] * 3

    done = client.post(path, data={"reason": "receiver fixed", "csrf_token": csrf_of(plan)})

    assert done.status_code == 302 and done.location == f"/admin/console/destinations/{orders}"
    assert "3 dead forwards sent again" in client.get(done.location).get_data(as_text=True)
    assert [status_of(runtime, f) for f in dead] == ["pending"] * 3
    assert status_of(runtime, untouched[0]) == "dead"
    assert audit_actions(runtime) == [("Grace (console)", "destination.replayed", orders)]
    with runtime.engine.connect() as c:
        details = c.execute(text("SELECT details FROM audit_log")).scalar_one()
    assert (details["reason"], details["replayed"]) == ("receiver fixed", 3)
    after = client.get(f"/admin/console/destinations/{orders}/replay").get_data(as_text=True)
    assert "No dead forward: nothing to send again." in after
