"""What the console's pages say, read through Flask's test client: an overview whose
columns add up, a bulk replay whose replays failed saying so, counts with their nouns in
the right number, times as people read them, and one limit for a reason on every face."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html import unescape

from sqlalchemy import text

from hooklatch.audit import REASON_MAX
from hooklatch.display import counted, shown_time
from hooklatch.events import bulk_replays
from tests.support.cli import run_cli
from tests.support.console import csrf_of, signed_in
from tests.support.database import count
from tests.support.pipeline import deliver, drain, make_dead, make_endpoint, post_json
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import AUTH

ENDED = ("processed", "ignored", "dead", "pending")


def found(pattern, page):
    """The part of ``page`` that ``pattern`` matches (across lines); there must be one."""
    match = re.search(pattern, page, re.S)
    assert match, f"nothing matches {pattern!r}"
    return match[0]


def overview_row(client, name):
    """The overview's figures for the endpoint ``name``, by the class of their cell."""
    page = client.get("/admin/console/").get_data(as_text=True)
    row = next(r for r in page.split('<tr class="endpoint">')[1:] if f">{name}</a>" in r)
    cells = re.findall(r'<td class="n (\w+)">(\d+)</td>', row.split("</tr>")[0])
    return {column: int(n) for column, n in cells}


def test_the_overview_adds_up_with_events_in_every_state(app, runtime, router):
    runtime.settings = replace(
        runtime.settings, max_attempts=2, retry_base_seconds=3600, retry_max_seconds=3600
    )
    client, _ = signed_in(app)
    router.on("stripe", "effect.ok")(lambda event, ctx: None)

    @router.on("stripe", "effect.fails")
    def fails(event, ctx):
        raise RuntimeError("down")

    endpoint, _ = make_endpoint(runtime, name="everything")
    real_clock = runtime.clock
    # Received a day and more ago, ended now: in neither side of the last 24 hours.
    yesterday = real_clock() - timedelta(hours=25)
    runtime.clock = lambda: yesterday
    body = stripe_event("evt_yesterday", event_type="effect.ok")
    signed = stripe_headers(body, "whsec_test_secret", timestamp=int(yesterday.timestamp()))
    assert post_json(client, endpoint, body, signed).status_code == 200
    runtime.activity.flush()
    runtime.clock = real_clock
    for name, event_type in [
        ("evt_ok", "effect.ok"),
        ("evt_ok_too", "effect.ok"),
        ("evt_nobody", "nobody.listens"),
        ("evt_dies", "effect.fails"),
        ("evt_retries", "effect.fails"),
    ]:
        deliver(client, endpoint, name, event_type)
    runtime.activity.flush()
    drain(runtime, until=lambda: count(runtime, "SELECT count(*) FROM attempts") >= 6)
    with runtime.engine.begin() as c:  # one failed event's retry is due at once
        c.execute(text("UPDATE events SET next_attempt_at = now() WHERE external_id = 'evt_dies'"))
    drain(runtime, until=lambda: count(runtime, "SELECT count(*) FROM attempts") >= 7)
    deliver(client, endpoint, "evt_not_run_yet", "effect.ok")
    runtime.activity.flush()

    shown = overview_row(client, "everything")

    assert shown["accepted"] == sum(shown[state] for state in ENDED), shown
    assert {state: shown[state] for state in ENDED} == {
        "processed": 2,
        "ignored": 1,
        "dead": 1,
        "pending": 2,  # one retrying, one not run yet
    }
    assert shown["failed"] == 3  # attempts: evt_dies twice, evt_retries once


def all_fail(router):
    @router.on("stripe", "effect.bulk")
    def fails(event, ctx):
        raise RuntimeError("still down")


def run_batch(client, runtime, reason="API back up"):
    """The dry run's confirmation sent from the console, then the batch run to its end."""
    plan = client.get("/admin/console/replays/new?status=dead")
    answer = client.post(
        "/admin/console/replays",
        data={"status": "dead", "reason": reason, "csrf_token": csrf_of(plan)},
    )
    assert answer.status_code == 302, answer.get_data(as_text=True)
    batch_id = int(answer.location.rsplit("/", 1)[1])
    later = runtime.clock() + timedelta(minutes=5)
    with runtime.session_factory.begin() as session:
        bulk_replays.advance(session, now=later, window=runtime.settings.replay_batch_window)
    drain(runtime)
    return batch_id


def test_a_bulk_replay_whose_every_replay_failed_says_so(app, runtime, router):
    all_fail(router)
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, "evt_f1", "evt_f2", "evt_f3", event_type="effect.bulk")

    batch_id = run_batch(client, runtime)
    page = client.get(f"/admin/console/replays/{batch_id}").get_data(as_text=True)
    listed = client.get("/admin/console/replays").get_data(as_text=True)

    heading = found(r"<h1>.*?</h1>", page)
    assert '<span class="status failed">done, 3 failed</span>' in heading
    assert "status done" not in heading  # not the green of a batch that succeeded
    text_ = re.sub(r"<[^>]+>", "", found(r'<p class="progress-text">.*?</p>', page))
    for part in ("succeeded 0", "failed 3", "cancelled 0", "3 events replayed"):
        assert part in text_, text_
    bar = found(r'<svg class="bar".*?</svg>', page)
    assert re.findall(r'<rect class="(\w+)" x="(\d+)" y="0" width="(\d+)"', bar) == [
        ("failed", "0", "3")
    ]
    assert '<span class="status failed">done, 3 failed</span>' in listed


def test_a_bulk_replay_with_some_failures_is_not_green_either(app, runtime, router):
    @router.on("stripe", "effect.bulk")
    def fails_once(event, ctx):
        if event.external_id == "evt_p1":
            raise RuntimeError("this one is still broken")

    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, "evt_p1", "evt_p2", event_type="effect.bulk")

    batch_id = run_batch(client, runtime)
    page = client.get(f"/admin/console/replays/{batch_id}").get_data(as_text=True)

    assert '<span class="status partly">done, 1 failed</span>' in page
    bar = found(r'<svg class="bar".*?</svg>', page)
    assert re.findall(r'<rect class="(\w+)" x="(\d+)" y="0" width="(\d+)"', bar) == [
        ("succeeded", "0", "1"),
        ("failed", "1", "1"),
    ]


def test_counts_take_the_noun_in_the_right_number():
    assert [counted(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]
    assert counted(1, "more key", "more keys") == "1 more key"
    assert counted(3, "more key", "more keys") == "3 more keys"


def test_one_event_and_two_events_read_right_in_the_console_and_the_cli(
    app, runtime, router, settings
):
    router.on("stripe", "effect.bulk")(lambda event, ctx: None)
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    make_dead(client, runtime, endpoint, "evt_one", event_type="effect.bulk")

    def plan():
        page = client.get("/admin/console/replays/new?status=dead").get_data(as_text=True)
        return " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())

    assert "1 event matches." in plan() and "Replay 1 event " in plan()
    assert (
        "1 event matches "
        in run_cli(settings, "events", "replay", "--status", "dead", "--dry-run").output
    )

    make_dead(client, runtime, endpoint, "evt_two", event_type="effect.bulk")
    assert "2 events match." in plan() and "Replay 2 events " in plan()
    batch_id = run_batch(client, runtime)
    page = client.get(f"/admin/console/replays/{batch_id}").get_data(as_text=True)
    assert ">2 events</span> replayed" in page
    assert "1 events" not in page and "1 replays" not in page


def test_times_read_to_the_second_in_utc_with_the_exact_value_on_hover(app, runtime):
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_when", "effect.when")
    with runtime.engine.begin() as c:
        c.execute(
            text("UPDATE events SET received_at = :at WHERE id = :id"),
            {"at": datetime(2026, 11, 26, 12, 37, 29, 987654, tzinfo=UTC), "id": event_id},
        )
    exact = "2026-11-26T12:37:29.987654+00:00"
    shown = f'<time datetime="{exact}" title="{exact}">2026-11-26 12:37:29 UTC</time>'

    for url in ("/admin/console/events", f"/admin/console/events/{event_id}"):
        page = client.get(url).get_data(as_text=True)
        assert shown in page, url
        outside_attributes = re.sub(r"<[^>]+>", "", page)
        assert not re.search(r"\d\d:\d\d:\d\d\.\d|\d{4}-\d\d-\d\dT\d\d", outside_attributes), url
    assert shown_time("2026-11-26T12:37:29.999999+01:00") == "2026-11-26 11:37:29 UTC"


def test_a_reason_of_1000_characters_is_taken_and_1001_refused_on_the_console(app, runtime):
    assert REASON_MAX == 1000
    client, _ = signed_in(app)
    endpoint, _ = make_endpoint(runtime)
    taken, refused = make_dead(client, runtime, endpoint, "evt_r1", "evt_r2", event_type="x.y")
    page = client.get(f"/admin/console/events/{taken}")
    assert 'name="reason" required maxlength="1000"' in page.get_data(as_text=True)
    form = {"csrf_token": csrf_of(page)}

    client.post(f"/admin/console/events/{taken}/replay", data={**form, "reason": "r" * 1000})
    answer = client.post(
        f"/admin/console/events/{refused}/replay", data={**form, "reason": "r" * 1001}
    )
    shown = client.get(answer.location).get_data(as_text=True)

    assert "a reason is at most 1,000 characters" in shown
    replayed = "SELECT event_id, length(reason) FROM replays"
    with runtime.engine.connect() as c:
        assert c.execute(text(replayed)).all() == [(taken, 1000)]
    plan = client.get("/admin/console/replays/new?status=dead").get_data(as_text=True)
    assert 'name="reason" required maxlength="1000"' in plan
    bulk = client.post(
        "/admin/console/replays", data={**form, "status": "dead", "reason": "r" * 1001}
    )
    assert bulk.status_code == 400 and "at most 1,000 characters" in bulk.get_data(as_text=True)
    assert count(runtime, "SELECT count(*) FROM replay_batches") == 0


def test_a_reason_of_1000_characters_is_taken_and_1001_refused_by_the_api(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    taken, refused = make_dead(client, runtime, endpoint, "evt_a1", "evt_a2", event_type="x.y")

    one = client.post(f"/admin/events/{taken}/replay", json={"reason": "r" * 1000}, headers=AUTH)
    too_long = client.post(
        f"/admin/events/{refused}/replay", json={"reason": "r" * 1001}, headers=AUTH
    )
    bulk = client.post(
        "/admin/replays", json={"status": "dead", "reason": "r" * 1000}, headers=AUTH
    )

    assert one.status_code == 202, one.json
    assert (too_long.status_code, too_long.json["error"]) == (400, "reason_too_long")
    assert bulk.status_code == 202, bulk.json


def test_a_console_url_that_is_no_page_gets_the_consoles_page_and_others_json(app):
    client, _ = signed_in(app)

    page = client.get("/admin/console/no-such-page")
    api = client.get("/admin/no-such-route")

    assert page.status_code == 404 and "Nothing here." in page.get_data(as_text=True)
    assert page.mimetype == "text/html"
    assert (api.status_code, api.json["error"]) == (404, "not_found")
