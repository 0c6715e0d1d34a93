"""The console in a real browser (Debian's chromium, driven by Playwright), against the
Procfile's web process, a relay and a worker: sign in, filter, open an event, replay it
and see the new attempt; bulk-replay dead events after a dry run and watch them become
processed; rotate a secret; neither a form posted without its CSRF token nor a script
in an event's body does anything; and every page, found in the app's URL map, fits a
phone 375 px wide and a desktop. The screenshots in docs/ come from these tests
(HOOKLATCH_SCREENSHOTS=docs/screenshots)."""

from __future__ import annotations

import json
import re
import time

import pytest
import requests
from flask import url_for
from sqlalchemy import select

from hooklatch.endpoints.models import Endpoint
from hooklatch.ordering.service import set_ordering
from tests.support.browser import launched, screenshot
from tests.support.database import count, load_event
from tests.support.forwarding_rows import seed_destination, seed_forward
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.processes import hooklatch_cmd, process_env, start_procfile_web
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import ADMIN_TOKEN as TOKEN
from tests.support.tokens import AUTH

SECRET = "whsec_console_secret"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def browser():
    yield from launched()


@pytest.fixture
def stack(procs, proc_settings, tmp_path):
    """gunicorn, a relay and a worker; handlers fail while tmp_path/markers/broken exists."""
    markers = tmp_path / "markers"
    markers.mkdir()
    extra = {"HOOKLATCH_TEST_MARKERS": str(markers), "HOOKLATCH_MAX_ATTEMPTS": "1"}
    base, _, _ = start_procfile_web(procs, proc_settings, **extra)
    env = process_env(proc_settings, **extra)
    procs("relay", hooklatch_cmd("relay"), env)
    procs("worker", hooklatch_cmd("worker"), env)
    return base, markers


@pytest.fixture
def page(browser, stack):
    base, _ = stack
    context = browser.new_context(base_url=base, viewport={"width": 1360, "height": 900})
    page = context.new_page()
    dialogs: list[str] = []

    def seen(dialog):
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", seen)
    page.dialogs = dialogs
    yield page
    context.close()


def post_event(base, endpoint, external_id, event_type, *, secret=SECRET, **fields):
    body = stripe_event(external_id, event_type=event_type, **fields)
    answer = requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, secret), timeout=10
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["events"][0]["id"]


def sign_in(page, name="Ada"):
    page.goto("/admin/console/")
    assert "/admin/console/login" in page.url
    page.fill("input[name=name]", name)
    page.fill("input[name=token]", TOKEN)
    submit(page, "button[type=submit]")
    assert page.url.endswith("/admin/console/")


def submit(page, selector):
    """Click what sends a form or follows a link, and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(selector)


def reloaded(page, check):
    """Reload the page, then ``check()`` it (``page.reload() or check()`` never checks:
    the reload's response is true)."""
    page.reload()
    return check()


def status_of(runtime, event_id):
    return load_event(runtime, event_id).status


def test_sign_in_filter_open_an_event_replay_it_and_see_the_new_attempt(page, stack, runtime):
    base, _ = stack
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET], name="billing")
    done = post_event(base, endpoint, "evt_console_ok", "effect.console")
    post_event(base, endpoint, "evt_console_other", "customer.created")
    wait_for(lambda: status_of(runtime, done) == "processed", timeout=30, message="processed")

    sign_in(page)
    cookie = next(c for c in page.context.cookies() if c["name"] == "hooklatch_console")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["expires"] > 0
    row = page.locator("table tbody tr", has_text="billing")
    # The web process writes its counts every couple of seconds.
    wait_for(
        lambda: reloaded(page, lambda: row.locator("td.n").first.inner_text() == "2"),
        timeout=15,
        message="the overview counting the two deliveries accepted",
    )
    screenshot(page, "overview")

    page.goto("/admin/console/events")
    page.fill("input[name=type]", "effect.*")
    submit(page, "form.filters button[type=submit]")
    rows = page.locator("table.events tbody tr")
    assert rows.count() == 1 and "evt_console_ok" in rows.inner_text()
    screenshot(page, "events")
    submit(page, "table.events tbody a")
    assert page.url.endswith(f"/admin/console/events/{done}")
    assert page.locator("tr.attempt").count() == 1

    page.fill("input[name=reason]", "checking the console")
    submit(page, "text=Replay this event")
    assert "Replay requested" in page.inner_text(".flash")
    wait_for(
        lambda: reloaded(page, lambda: page.locator("tr.attempt").count() == 2),
        timeout=30,
        message="the replay's attempt on the page",
    )
    assert "checking the console" in page.inner_text("body")
    screenshot(page, "event")
    page.goto("/admin/console/audit")
    assert "Ada (console)" in page.inner_text("table") and "replay" in page.inner_text("table")


def test_bulk_replay_of_dead_events_dry_run_first_then_watch_them_processed(page, stack, runtime):
    base, markers = stack
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET], name="orders")
    (markers / "broken").touch()  # the downstream API is down
    ids = [post_event(base, endpoint, f"evt_bulk_{n}", "flaky.order") for n in range(3)]
    wait_for(
        lambda: all(status_of(runtime, i) == "dead" for i in ids),
        timeout=30,
        message="three dead events",
    )
    (markers / "broken").unlink()  # fixed

    sign_in(page)
    page.goto("/admin/console/events?status=dead&type=flaky.*")
    submit(page, "text=Replay all matching")
    assert "3 events match" in page.inner_text("p.matched")
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 0  # a dry run
    screenshot(page, "bulk-replay-dry-run")
    page.fill("input[name=reason]", "API back up")
    submit(page, "text=Replay 3 events")
    page.wait_for_url(re.compile(r".*/admin/console/replays/\d+$"))
    wait_for(
        lambda: reloaded(page, lambda: "done" in page.inner_text("h1")),
        timeout=30,
        message="the batch done",
    )
    wait_for(
        lambda: all(status_of(runtime, i) == "processed" for i in ids),
        timeout=30,
        message="the events processed",
    )
    page.reload()
    assert "succeeded 3" in page.inner_text("p.progress-text")
    screenshot(page, "bulk-replay")
    page.goto("/admin/console/events?status=dead")
    assert "No event matches" in page.inner_text("table.events")
    doubled = (
        "SELECT count(*) FROM "
        "(SELECT event_id FROM replays GROUP BY event_id HAVING count(*) > 1) AS doubled"
    )
    assert count(runtime, doubled) == 0


def test_rotate_a_secret_and_see_which_one_verifies(page, stack, runtime):
    base, _ = stack
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET], name="rotating")
    old = runtime.box.fingerprint(SECRET)
    new_secret = "whsec_the_new_one"
    new = runtime.box.fingerprint(new_secret)

    sign_in(page)
    page.goto("/admin/console/endpoints")
    submit(page, "text=rotating")
    page.fill("input[name=secret]", new_secret)
    submit(page, "text=Add secret")
    assert page.locator("tr.secret").count() == 2
    assert new_secret not in page.content()  # pasted: never shown back
    post_event(base, endpoint, "evt_signed_new", "effect.rotate", secret=new_secret)
    wait_for(
        lambda: reloaded(
            page, lambda: "never" not in page.locator("tr.secret", has_text=new).inner_text()
        ),
        timeout=15,
        message="the new secret's last verification shown",
    )
    assert "never" in page.locator("tr.secret", has_text=old).inner_text()
    screenshot(page, "endpoint")
    with page.expect_navigation():
        page.locator("tr.secret", has_text=old).locator("button").click()
    assert page.locator("tr.secret").count() == 1
    page.goto("/admin/console/audit")
    log = page.inner_text("table")
    assert "secret_added" in log and "secret_removed" in log and new in log
    assert SECRET not in page.content() and new_secret not in page.content()
    screenshot(page, "audit")


def test_a_generated_secret_is_shown_once(page, stack, runtime):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-first"], name="gh")
    sign_in(page)
    page.goto(f"/admin/console/endpoints/{endpoint}")
    submit(page, "text=Add secret")
    shown = page.inner_text("#new-secret").strip()
    assert len(shown) >= 40
    page.goto(f"/admin/console/endpoints/{endpoint}")
    assert shown not in page.content()


def test_a_post_without_the_csrf_token_changes_nothing(page, stack, runtime):
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET], name="guarded")
    sign_in(page)
    # Signed in, the browser's cookie sent along: only the token is missing.
    forged = page.request.post(
        f"/admin/console/endpoints/{endpoint}/enabled", form={"enabled": "false"}
    )
    assert forged.status == 400
    assert "not sent by this console" in forged.text()
    assert count(runtime, "SELECT count(*) FROM endpoints WHERE enabled") == 1
    # The same form from the page works.
    page.goto(f"/admin/console/endpoints/{endpoint}")
    submit(page, "text=Disable")
    assert count(runtime, "SELECT count(*) FROM endpoints WHERE enabled") == 0
    headers = page.request.get(f"/admin/console/endpoints/{endpoint}").headers
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"


def test_a_script_in_an_event_body_is_shown_as_text_and_never_runs(page, stack, runtime):
    base, _ = stack
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET], name="hostile")
    payload = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
    event_id = post_event(base, endpoint, "evt_<b>xss</b>", "invoice.<i>paid</i>", note=payload)
    sign_in(page)
    page.goto(f"/admin/console/events/{event_id}")
    # Shown, as the text of the JSON string it is in.
    assert json.dumps(payload)[1:-1] in page.inner_text("pre.body")
    assert page.locator("script:not([src])").count() == 0
    assert page.locator("img").count() == 0
    assert page.evaluate("window.__xss") is None
    page.goto("/admin/console/events")
    assert "invoice.<i>paid</i>" in page.inner_text("table.events")
    page.goto("/admin/console/")
    time.sleep(0.5)
    assert page.evaluate("window.__xss") is None
    assert page.dialogs == []


# -- every page at a phone's width ---------------------------------------------------------

PHONE = {"width": 375, "height": 740}
DESKTOP = {"width": 1360, "height": 900}
# Pages that are no page: a file, and the console's own script and style.
NOT_PAGES = {"console.static", "console.event_body"}
OPEN_PAGES = {"console.login"}  # seen signed out
QUERIES = {"console.plan_replay": "?status=dead&type=flaky.*"}
LONG = {
    "id": "evt_" + "1234567890" * 20,
    "type": "effect." + "averyveryverylongeventtype" * 8,
    "note": "n" * 3000,
    "header": "h" * 1500,
    "customer": "cus_" + "k" * 200,
}
# What a page must be: nothing wider than the window (a table scrolls in its own box,
# a long value breaks or scrolls in its own), the navigation inside the header, and
# every time on one line, with its exact value on hover.
MEASURE = r"""() => {
  const header = document.querySelector("header").getBoundingClientRect();
  const inHeader = r => r.left >= header.left && r.right <= header.right
                        && r.top >= header.top && r.bottom <= header.bottom;
  const links = [...document.querySelectorAll("header a, header button")];
  const navTops = [...document.querySelectorAll("header nav a")]
    .map(a => a.getBoundingClientRect().top);
  const times = [...document.querySelectorAll("time")];
  const wrong = t => !t.dateTime || t.title !== t.dateTime || t.getClientRects().length !== 1
                     || getComputedStyle(t).whiteSpace !== "nowrap";
  const iso = /\d{4}-\d\d-\d\dT\d\d:\d\d|\d\d:\d\d:\d\d\.\d/g;
  return {
    width: window.innerWidth,
    scroll: document.scrollingElement.scrollWidth,
    outside: links.filter(a => !inHeader(a.getBoundingClientRect())).length,
    lines: new Set(navTops).size,
    times: times.length,
    badTimes: times.filter(wrong).map(t => t.outerHTML),
    rawTimes: document.body.innerText.match(iso) || [],
  };
}"""


def console_pages(app, ids):
    """Every page the console serves to GET, from the app's URL map, as a URL with the
    ids of real rows: a page added later is visited without changing this test, and one
    whose URL takes an id this test does not know fails it."""
    urls = {}
    with app.test_request_context():
        for rule in app.url_map.iter_rules():
            if not rule.endpoint.startswith("console.") or rule.endpoint in NOT_PAGES:
                continue
            if "GET" not in rule.methods:
                continue
            unknown = set(rule.arguments) - set(ids)
            assert not unknown, f"{rule.rule}: no row to show for {unknown}: add one to ids"
            values = {name: ids[name] for name in rule.arguments}
            urls[rule.endpoint] = url_for(rule.endpoint, **values) + QUERIES.get(rule.endpoint, "")
    return urls


def real_data(base, runtime, markers):
    """Rows for every page, made through the running processes: events processed,
    ignored, dead and pending, one with a long id, type, body and header; a key parked
    by a dead event with a long key; a bulk replay whose every replay failed; audit
    entries; a destination with dead forwards and a long last error."""
    billing, _ = make_endpoint(runtime, secrets=[SECRET], name="billing")
    storefront, _ = make_endpoint(
        runtime, secrets=[SECRET], name="orders-from-the-european-storefront-and-partners"
    )
    with runtime.session_factory.begin() as session:
        row = session.scalars(select(Endpoint).where(Endpoint.id == storefront)).one()
        set_ordering(session, row, actor="test", now=runtime.clock(), policy="fifo")
    long_body = stripe_event(LONG["id"], event_type=LONG["type"], note=LONG["note"])
    headers = {**stripe_headers(long_body, SECRET), "X-Trace-Context": LONG["header"]}
    answer = requests.post(f"{base}/hooks/{billing}", data=long_body, headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
    long_event = answer.json()["events"][0]["id"]
    post_event(base, billing, "evt_nobody", "customer.created")  # ignored
    (markers / "broken").touch()
    dead = [post_event(base, billing, f"evt_dies_{n}", "flaky.order") for n in range(2)]
    post_event(base, storefront, "evt_parks", "flaky.order", customer=LONG["customer"])
    post_event(base, storefront, "evt_behind", "effect.order", customer=LONG["customer"])
    wait_for(
        lambda: (
            all(status_of(runtime, i) == "dead" for i in dead)
            and count(
                runtime, "SELECT count(*) FROM ordering_keys WHERE parked_event_id IS NOT NULL"
            )
            == 1
        ),
        timeout=30,
        message="dead events and a parked key",
    )
    started = requests.post(
        f"{base}/admin/replays",
        json={"status": "dead", "endpoint": billing, "reason": "API back up (it was not)"},
        headers=AUTH,
        timeout=10,
    )
    assert started.status_code == 202, started.text
    batch = started.json()["id"]
    wait_for(
        lambda: count(runtime, "SELECT count(*) FROM replays WHERE status = 'failed'") == 2,
        timeout=30,
        message="the bulk replay's replays failed",
    )
    wait_for(lambda: status_of(runtime, long_event) == "processed", timeout=30, message="processed")
    # Seeded directly (no kind of destination is built in): its page is what is measured.
    destination = seed_destination(
        runtime, "orders-to-the-warehouse-and-partners", last_error="HTTP 503: " + LONG["note"]
    )
    for event in (long_event, *dead):
        seed_forward(runtime, destination, event, status="dead", attempts=25, last_error="x" * 900)
    return {
        "event_id": long_event,
        "endpoint_id": storefront,
        "batch_id": batch,
        "destination_id": destination,
    }


def fits(page, url=None, *, wide=False):
    """The page at ``url`` (or the one open) fits the window; returns what was measured."""
    if url is not None:
        page.goto(url)
    url = page.url
    seen = page.evaluate(MEASURE)
    assert seen["scroll"] <= seen["width"], f"{url} is {seen['scroll']} px wide at {seen['width']}"
    assert seen["outside"] == 0, f"{url}: the navigation spills out of the header"
    assert seen["badTimes"] == [], f"{url}: times wrapped or without their exact value"
    assert seen["rawTimes"] == [], f"{url}: raw ISO times shown"
    if wide:
        assert seen["lines"] == 1, f"{url}: the navigation takes {seen['lines']} lines"
    return seen


def test_every_console_page_fits_a_phone_375_px_wide_and_a_desktop(browser, stack, runtime, app):
    base, markers = stack
    ids = real_data(base, runtime, markers)
    urls = console_pages(app, ids)
    assert {"console.overview", "console.events", "console.event", "console.keys"} <= set(urls)
    errors = {
        "/admin/console/no-such-page": "Nothing here.",
        "/admin/console/events/999999": "Nothing here.",
        "/admin/console/endpoints/ep_no_such_endpoint": "no endpoint",
        "/admin/console/events?type=%00": "holds a NUL character",
    }
    github, _ = make_endpoint(runtime, "github", secrets=["gh-first"], name="gh")

    phone = browser.new_context(base_url=base, viewport=PHONE)
    page = phone.new_page()
    for endpoint in sorted(OPEN_PAGES):
        fits(page, urls[endpoint])
    sign_in(page)
    times = 0
    for endpoint, url in sorted(urls.items()):
        if endpoint not in OPEN_PAGES:
            times += fits(page, url)["times"]
            if endpoint == "console.event":
                screenshot(page, "event-phone", full_page=False)
    assert times >= 20  # the pages showed times, and each was checked
    for url, says in errors.items():
        fits(page, url)
        assert says in page.inner_text("main"), url
    page.goto(f"/admin/console/endpoints/{github}")
    submit(page, "text=Add secret")  # the page that shows a generated secret once
    assert len(page.inner_text("#new-secret").strip()) >= 40
    fits(page)
    phone.close()

    desktop = browser.new_context(base_url=base, viewport=DESKTOP)
    page = desktop.new_page()
    sign_in(page)
    for endpoint, url in sorted(urls.items()):
        if endpoint not in OPEN_PAGES:
            fits(page, url, wide=True)
            if endpoint == "console.bulk_replay":
                screenshot(page, "bulk-replay-failed")
    desktop.close()
