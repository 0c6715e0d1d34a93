"""What operators see of and do to ordering: `hooklatch ordering` (set, show, blocked,
release), blocked keys in `hooklatch status`, the admin API's routes and the console's
Keys page and ordering form. A parked key and a failing head are built as rows."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import select

from hooklatch.audit import AuditEntry
from hooklatch.endpoints.models import Endpoint
from hooklatch.events.models import DEAD, PENDING, Attempt, Event, OutboxEntry
from hooklatch.ordering.models import OrderingKey
from tests.support.cli import run_cli
from tests.support.console import csrf_of, signed_in
from tests.support.pipeline import configure_ordering, make_endpoint
from tests.support.tokens import AUTH

SCRIPT_KEY = 'cus_<script>alert("key")</script>'


@dataclass
class Blocked:
    endpoint: str
    dead: int  # parks "cus_parked"
    parked_behind: list[int]
    failing: int  # the first event of "cus_failing", its attempt failed
    failing_behind: list[int]


def fifo_endpoint(runtime, name=None):
    endpoint, _ = make_endpoint(runtime, name=name)
    configure_ordering(runtime, endpoint, policy="fifo")
    return endpoint


def keyed_event(session, endpoint, key, *, status=PENDING, attempts=0, error=None, at=None):
    row = Event(
        endpoint_id=endpoint,
        provider="stripe",
        external_id=f"evt_{uuid.uuid4().hex[:16]}",
        type="customer.updated",
        status=status,
        attempts=attempts,
        last_error=error,
        body=b"{}",
        headers={},
        body_sha256=uuid.uuid4().hex,
        next_attempt_at=at,
        ordering_key=key,
        ordering_position=0,
    )
    session.add(row)
    session.flush()
    return row.id


def park(runtime, endpoint, key, *, behind):
    """A dead event parking ``key``, and ``behind`` pending events after it (no outbox
    row: a parked key's events are not handed out)."""
    now = runtime.clock()
    with runtime.session_factory.begin() as session:
        dead = keyed_event(session, endpoint, key, status=DEAD, attempts=8, error="KeyError: 'x'")
        waiting = [keyed_event(session, endpoint, key, at=now) for _ in range(behind)]
        session.add(
            OrderingKey(
                endpoint_id=endpoint,
                key=key,
                parked_event_id=dead,
                parked_at=now - timedelta(minutes=10),
                updated_at=now,
            )
        )
    return dead, waiting


def failing_head(runtime, endpoint, key, *, behind):
    """A pending first event whose one attempt failed, and ``behind`` events after it."""
    now = runtime.clock()
    with runtime.session_factory.begin() as session:
        head = keyed_event(
            session,
            endpoint,
            key,
            attempts=1,
            error="TimeoutError: upstream",
            at=now + timedelta(minutes=1),
        )
        session.add(
            Attempt(
                event_id=head,
                number=1,
                outcome="failed",
                error="TimeoutError: upstream",
                started_at=now - timedelta(minutes=5, seconds=1),
                finished_at=now - timedelta(minutes=5),
            )
        )
        waiting = [keyed_event(session, endpoint, key, at=now) for _ in range(behind)]
    return head, waiting


@pytest.fixture
def blocked(runtime):
    endpoint = fifo_endpoint(runtime, name="billing")
    dead, parked_behind = park(runtime, endpoint, "cus_parked", behind=2)
    failing, failing_behind = failing_head(runtime, endpoint, "cus_failing", behind=1)
    return Blocked(endpoint, dead, parked_behind, failing, failing_behind)


def audit_entries(runtime, action):
    with runtime.session_factory() as session:
        return session.scalars(select(AuditEntry).where(AuditEntry.action == action)).all()


def outbox_of(runtime, event_id):
    with runtime.session_factory() as session:
        return session.scalars(select(OutboxEntry).where(OutboxEntry.event_id == event_id)).all()


def parked_event(runtime, endpoint, key):
    with runtime.session_factory() as session:
        row = session.get(OrderingKey, (endpoint, key))
        return row.parked_event_id if row else None


def revision(runtime, endpoint):
    with runtime.session_factory() as session:
        return session.get(Endpoint, endpoint).revision


# -- the CLI ------------------------------------------------------------------------------


def test_ordering_blocked_says_so_when_no_key_is_blocked(settings, runtime):
    fifo_endpoint(runtime)
    assert run_cli(settings, "ordering", "blocked").output == "no blocked keys\n"
    assert json.loads(run_cli(settings, "ordering", "blocked", "--json").output) == []


def test_ordering_blocked_lists_a_parked_key_and_a_failing_head_longest_first(
    settings, runtime, blocked
):
    listed = json.loads(run_cli(settings, "ordering", "blocked", "--json").output)

    # The parked key (10 minutes) before the failing one (5). Waiting counts the key's
    # pending events behind the one holding it, never the holder itself.
    assert [(b["key"], b["event_id"], b["waiting"]) for b in listed] == [
        ("cus_parked", blocked.dead, 2),
        ("cus_failing", blocked.failing, 1),
    ]
    assert {b["endpoint_id"] for b in listed} == {blocked.endpoint}
    assert listed[0]["why"].startswith("dead, parking its key") and "KeyError" in listed[0]["why"]
    assert listed[1]["why"].startswith("failing: attempt 1 failed")
    assert listed[0]["since"] < listed[1]["since"]
    screen = run_cli(settings, "ordering", "blocked").output.splitlines()
    assert len(screen) == 2
    assert f"key cus_parked  event {blocked.dead}" in screen[0] and "2 waiting" in screen[0]
    assert f"key cus_failing  event {blocked.failing}" in screen[1]


def test_a_key_is_printed_with_its_control_characters_escaped(settings, runtime):
    """A key comes from a payload: an escape sequence in it must not reach the terminal."""
    endpoint = fifo_endpoint(runtime)
    park(runtime, endpoint, "cus_\x1b[2Jgone\nnext", behind=1)

    screen = run_cli(settings, "ordering", "blocked").output

    assert "\x1b" not in screen and len(screen.splitlines()) == 1
    assert "key cus_\\x1b[2Jgone\\nnext" in screen


def test_ordering_release_unparks_audits_and_queues_the_keys_next_event(settings, runtime, blocked):
    result = run_cli(
        settings,
        "ordering",
        "release",
        "billing",
        "cus_parked",
        "--reason",
        "refunded by hand",
    )

    assert f"event {blocked.dead} stays dead" in result.output
    assert parked_event(runtime, blocked.endpoint, "cus_parked") is None
    [entry] = audit_entries(runtime, "key_released")
    assert entry.actor.endswith(" (cli)") and entry.target == f"endpoint {blocked.endpoint}"
    assert entry.details == {
        "key": "cus_parked",
        "dead_event": blocked.dead,
        "reason": "refunded by hand",
    }
    first, second = blocked.parked_behind
    assert [row.job_id for row in outbox_of(runtime, first)] == [None]
    assert outbox_of(runtime, second) == []  # it waits for the first, as before
    with runtime.session_factory() as session:
        assert session.get(Event, blocked.dead).status == DEAD
    listed = json.loads(run_cli(settings, "ordering", "blocked", "--json").output)
    assert [b["key"] for b in listed] == ["cus_failing"]


@pytest.mark.parametrize("key", ["cus_failing", "cus_never_seen"])
def test_releasing_a_key_that_is_not_parked_fails_in_one_line(settings, runtime, blocked, key):
    result = run_cli(
        settings, "ordering", "release", blocked.endpoint, key, "--reason", "why not", ok=False
    )

    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"Error: key '{key}' of endpoint {blocked.endpoint} is not parked"
    ]
    assert audit_entries(runtime, "key_released") == []
    assert outbox_of(runtime, blocked.failing_behind[0]) == []


def test_ordering_set_changes_the_settings_bumps_the_revision_and_audits(settings, runtime):
    endpoint, _ = make_endpoint(runtime, name="shop")
    before = revision(runtime, endpoint)

    changed = json.loads(
        run_cli(
            settings,
            "ordering",
            "set",
            "shop",
            "--policy",
            "fifo",
            "--hold",
            "10",
            "--key-path",
            "data.object.metadata.account_id",
            "--json",
        ).output
    )

    assert changed == {
        "endpoint_id": endpoint,
        "name": "shop",
        "policy": "fifo",
        "dead": "park",
        "hold_seconds": 10,
        "key_path": "data.object.metadata.account_id",
        "revision": before + 1,
    }
    assert revision(runtime, endpoint) == before + 1
    [entry] = audit_entries(runtime, "endpoint_ordering")
    assert entry.actor.endswith(" (cli)")
    assert entry.details["before"]["policy"] == "none"
    assert entry.details["after"]["hold_seconds"] == 10
    # Back to the provider's key; the rest stays.
    run_cli(settings, "ordering", "set", endpoint, "--provider-key", "--dead", "release")
    shown = json.loads(run_cli(settings, "ordering", "show", "shop", "--json").output)
    assert (shown["policy"], shown["dead"], shown["hold_seconds"], shown["key_path"]) == (
        "fifo",
        "release",
        10,
        None,
    )
    assert "policy:     fifo" in run_cli(settings, "ordering", "show", "shop").output
    described = json.loads(run_cli(settings, "endpoints", "show", "shop").output)
    assert described["ordering"] == {
        "policy": "fifo",
        "dead": "release",
        "hold_seconds": 10,
        "key_path": None,
    }
    # The same settings again change nothing and write nothing.
    again = run_cli(settings, "ordering", "set", "shop", "--policy", "fifo")
    assert "(unchanged)" in again.output.splitlines()[0]
    assert len(audit_entries(runtime, "endpoint_ordering")) == 2


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--policy", "serial", "--hold", "5"], 1, "needs ordering fifo"),
        (["--hold", "5"], 1, "needs ordering fifo"),  # the endpoint's policy is none
        (["--policy", "fifo", "--hold", "3601"], 1, "0 to 3600 seconds"),
        (["--policy", "bogus"], 2, "'bogus' is not one of"),
        (["--key-path", "data..id"], 1, "dotted names into the payload"),
        (["--key-path", "data.id", "--provider-key"], 2, "not both"),
        ([], 2, "give --policy"),
    ],
)
def test_ordering_set_refuses_settings_that_cannot_be(settings, runtime, args, code, says):
    endpoint, _ = make_endpoint(runtime)
    before = revision(runtime, endpoint)

    result = run_cli(settings, "ordering", "set", endpoint, *args, ok=False)

    assert result.exit_code == code, result.output
    assert says in result.output
    assert revision(runtime, endpoint) == before
    assert audit_entries(runtime, "endpoint_ordering") == []


# -- hooklatch status ---------------------------------------------------------------------


def test_status_lists_the_blocked_keys(settings, runtime, blocked):
    result = run_cli(settings, "status", "--json", ok=False)
    assert result.exit_code == 2, result.output  # no relay or worker: still a problem
    figures = json.loads(result.output)

    assert figures["blocked_keys_count"] == 2
    assert [(b["key"], b["event_id"], b["waiting"]) for b in figures["blocked_keys"]] == [
        ("cus_parked", blocked.dead, 2),
        ("cus_failing", blocked.failing, 1),
    ]
    assert all(b["why"] and b["since"] for b in figures["blocked_keys"])
    screen = run_cli(settings, "status", ok=False).output
    assert "blocked: 2 ordering keys" in screen
    assert f"key cus_parked  event {blocked.dead}" in screen


def test_status_lists_ten_blocked_keys_and_counts_them_all(settings, runtime):
    endpoint = fifo_endpoint(runtime)
    for n in range(12):
        park(runtime, endpoint, f"cus_{n:02}", behind=0)

    figures = json.loads(run_cli(settings, "status", "--json", ok=False).output)

    assert figures["blocked_keys_count"] == 12
    assert len(figures["blocked_keys"]) == 10
    assert "blocked: 12 ordering keys" in run_cli(settings, "status", ok=False).output


# -- the admin API ------------------------------------------------------------------------


def test_the_api_lists_blocked_keys_behind_its_token(client, blocked):
    assert client.get("/admin/keys/blocked").status_code == 401

    answer = client.get("/admin/keys/blocked", headers=AUTH)

    assert answer.status_code == 200
    assert answer.json["total"] == 2
    assert [(b["key"], b["event_id"]) for b in answer.json["blocked_keys"]] == [
        ("cus_parked", blocked.dead),
        ("cus_failing", blocked.failing),
    ]
    limited = client.get("/admin/keys/blocked?limit=1", headers=AUTH).json
    assert (len(limited["blocked_keys"]), limited["total"]) == (1, 2)


def test_the_api_releases_a_parked_key_once(client, runtime, blocked):
    url = f"/admin/endpoints/{blocked.endpoint}/keys/release"
    no_reason = client.post(url, json={"key": "cus_parked"}, headers=AUTH)
    assert (no_reason.status_code, no_reason.json["error"]) == (400, "reason_required")
    no_key = client.post(url, json={"reason": "x"}, headers=AUTH)
    assert (no_key.status_code, no_key.json["error"]) == (400, "bad_parameter")

    body = {"key": "cus_parked", "reason": "handled by hand", "requested_by": "alice"}
    answer = client.post(url, json=body, headers=AUTH)

    assert answer.status_code == 200, answer.json
    assert answer.json == {
        "endpoint_id": blocked.endpoint,
        "key": "cus_parked",
        "dead_event": blocked.dead,
    }
    assert parked_event(runtime, blocked.endpoint, "cus_parked") is None
    assert [row.job_id for row in outbox_of(runtime, blocked.parked_behind[0])] == [None]
    [entry] = audit_entries(runtime, "key_released")
    assert entry.actor == "alice (127.0.0.1)"
    again = client.post(url, json=body, headers=AUTH)
    assert (again.status_code, again.json["error"]) == (404, "not_parked")
    failing = client.post(url, json={**body, "key": "cus_failing"}, headers=AUTH)
    assert (failing.status_code, failing.json["error"]) == (404, "not_parked")
    elsewhere = client.post("/admin/endpoints/nosuch/keys/release", json=body, headers=AUTH)
    assert elsewhere.status_code == 404


def test_a_release_reason_over_1000_characters_is_refused_not_cut_short(app_with, runtime, blocked):
    api = app_with().test_client()
    url = f"/admin/endpoints/{blocked.endpoint}/keys/release"
    too_long = {"key": "cus_parked", "reason": "r" * 1001}
    answer = api.post(url, json=too_long, headers=AUTH)
    assert (answer.status_code, answer.json["error"]) == (400, "reason_too_long")
    console, _ = signed_in(app_with())
    page = console.get("/admin/console/keys")
    assert 'name="reason" required maxlength="1000"' in page.get_data(as_text=True)
    refused = console.post(
        f"/admin/console/endpoints/{blocked.endpoint}/keys/release",
        data={**too_long, "csrf_token": csrf_of(page)},
    )
    assert refused.status_code == 400 and "at most 1,000 characters" in refused.get_data(
        as_text=True
    )
    assert parked_event(runtime, blocked.endpoint, "cus_parked") == blocked.dead

    taken = api.post(url, json={**too_long, "reason": "r" * 1000}, headers=AUTH)
    assert taken.status_code == 200, taken.json
    [entry] = audit_entries(runtime, "key_released")
    assert len(entry.details["reason"]) == 1000


def test_the_api_changes_the_ordering_or_says_why_not(client, runtime):
    endpoint, _ = make_endpoint(runtime)
    url = f"/admin/endpoints/{endpoint}/ordering"
    before = revision(runtime, endpoint)
    for refused in (
        {"policy": "serial", "hold_seconds": 5},
        {"policy": "bogus"},
        {"dead": "forget"},
        {"hold_seconds": "5"},
        {"hold_seconds": True},
        {"policy": None},
        {"key_path": "a b"},
        {"colour": "red"},
    ):
        answer = client.put(url, json=refused, headers=AUTH)
        assert (answer.status_code, answer.json["error"]) == (400, "bad_ordering"), refused
    assert revision(runtime, endpoint) == before

    settings = {"policy": "fifo", "dead": "release", "hold_seconds": 30, "key_path": "data.id"}
    answer = client.put(url, json={**settings, "requested_by": "bob"}, headers=AUTH)

    assert answer.status_code == 200, answer.json
    assert answer.json == {
        "endpoint_id": endpoint,
        "name": answer.json["name"],
        **settings,
        "revision": before + 1,
    }
    assert client.get(url, headers=AUTH).json == answer.json
    [entry] = audit_entries(runtime, "endpoint_ordering")
    assert entry.actor == "bob (127.0.0.1)"
    # null is the provider's key again; what is left out stays.
    answer = client.put(url, json={"key_path": None}, headers=AUTH)
    assert (answer.json["key_path"], answer.json["hold_seconds"]) == (None, 30)
    assert client.put("/admin/endpoints/nosuch/ordering", json={}, headers=AUTH).status_code == 404


# -- the console --------------------------------------------------------------------------


def test_the_keys_page_shows_a_key_from_a_payload_as_text(app_with, runtime, blocked):
    dead, _ = park(runtime, blocked.endpoint, SCRIPT_KEY, behind=1)
    console, _ = signed_in(app_with())

    page = console.get("/admin/console/keys")

    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "<script>alert" not in text
    assert "cus_&lt;script&gt;alert(&#34;key&#34;)&lt;/script&gt;" in text
    assert f'href="/admin/console/events/{dead}"' in text
    assert f'href="/admin/console/events/{blocked.failing}"' in text
    assert text.count('class="blocked-key"') == 3
    assert text.count('name="reason" required') == 2  # the parked keys, not the failing one
    assert 'href="/admin/console/keys"' in console.get("/admin/console/").get_data(as_text=True)


def test_a_parked_key_is_released_from_the_keys_page(app_with, runtime, blocked):
    dead, [behind] = park(runtime, blocked.endpoint, SCRIPT_KEY, behind=1)
    console, _ = signed_in(app_with())
    page = console.get("/admin/console/keys")
    url = f"/admin/console/endpoints/{blocked.endpoint}/keys/release"
    form = {"key": SCRIPT_KEY, "csrf_token": csrf_of(page)}

    no_reason = console.post(url, data={**form, "reason": " "})
    assert no_reason.status_code == 302
    assert parked_event(runtime, blocked.endpoint, SCRIPT_KEY) == dead

    answer = console.post(url, data={**form, "reason": "fixed by hand"})

    assert answer.status_code == 302 and answer.location == "/admin/console/keys"
    assert parked_event(runtime, blocked.endpoint, SCRIPT_KEY) is None
    assert [row.job_id for row in outbox_of(runtime, behind)] == [None]
    [entry] = audit_entries(runtime, "key_released")
    assert entry.actor == "Grace (console)" and entry.details["key"] == SCRIPT_KEY
    after = console.get("/admin/console/keys").get_data(as_text=True)
    assert "released" in after and "&lt;script&gt;" in after and "<script>alert" not in after
    again = console.post(url, data={**form, "reason": "twice"})
    assert again.status_code == 404 and "is not parked" in again.get_data(as_text=True)


def test_the_release_form_is_refused_without_its_csrf_token(app_with, runtime, blocked):
    console, _ = signed_in(app_with())

    answer = console.post(
        f"/admin/console/endpoints/{blocked.endpoint}/keys/release",
        data={"key": "cus_parked", "reason": "forged"},
    )

    assert answer.status_code == 400
    assert parked_event(runtime, blocked.endpoint, "cus_parked") == blocked.dead
    assert audit_entries(runtime, "key_released") == []


def test_the_endpoint_page_shows_and_changes_the_ordering(app_with, runtime):
    endpoint, _ = make_endpoint(runtime)
    before = revision(runtime, endpoint)
    console, _ = signed_in(app_with())
    page = console.get(f"/admin/console/endpoints/{endpoint}")
    assert '<option value="none" selected>' in page.get_data(as_text=True)
    url = f"/admin/console/endpoints/{endpoint}/ordering"
    form = {"policy": "fifo", "dead": "park", "hold_seconds": "15", "key_path": "data.id"}

    refused = console.post(url, data={**form, "policy": "serial", "csrf_token": csrf_of(page)})
    assert refused.status_code == 302
    shown = console.get(refused.location).get_data(as_text=True)
    assert "a hold window orders a key&#39;s events, so it needs ordering fifo" in shown
    assert revision(runtime, endpoint) == before
    forged = console.post(url, data=form)
    assert forged.status_code == 400

    answer = console.post(url, data={**form, "csrf_token": csrf_of(page)})

    assert answer.status_code == 302
    with runtime.session_factory() as session:
        row = session.get(Endpoint, endpoint)
        assert (row.ordering, row.hold_seconds, row.ordering_key_path, row.revision) == (
            "fifo",
            15,
            "data.id",
            before + 1,
        )
    [entry] = audit_entries(runtime, "endpoint_ordering")
    assert entry.actor == "Grace (console)"
    shown = console.get(answer.location).get_data(as_text=True)
    assert "Ordering changed" in shown and "<code>data.id</code>" in shown
