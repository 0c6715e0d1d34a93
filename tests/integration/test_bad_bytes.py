"""Bytes the database cannot hold (a NUL) in a path, a query string or a form field, on
every route of the real web process: the Flask app (admin API, console, /metrics, the
probes) answers 400 `bad_parameter` (a console page shows why), the public route 404
`unknown_endpoint` for a path that cannot be an endpoint id, and nothing is logged.
Invalid UTF-8 (``%ff``, an encoded lone surrogate) is read as text the database can
hold, and is answered as any unknown name is."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from flask import request
from sqlalchemy import select

from hooklatch.endpoints.models import Endpoint
from tests.support.console import TOKEN
from tests.support.pipeline import make_endpoint
from tests.support.processes import Proc, start_procfile_web
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
# A log line of hooklatch's or gunicorn's own is well under this; a traceback is not.
SHORT_LINE = 300
# What a console page says of a NUL that ``refuse_nul`` refused.
NUL_REFUSED = "holds a NUL character"


@dataclass(frozen=True)
class Probe:
    method: str
    path: str
    # Who asks: nobody, the API's bearer token, or a signed-in console session.
    who: str = "nobody"
    form: dict[str, str] | None = None
    json: Any = None
    # The answer expected: its status, and what it says (the JSON `error` field, or words
    # of the message a console page shows; None: not read).
    expect: int = 400
    says: str | None = "bad_parameter"
    # Nothing logged; else at most one short line.
    quiet: bool = True


def unknown(method: str, path: str, json: Any = None) -> Probe:
    """On the public route: a path that cannot be an endpoint id."""
    return Probe(method, path, json=json, expect=404, says="unknown_endpoint")


def page(method: str, path: str, who: str, form: dict[str, str] | None = None) -> Probe:
    """On a console route: an error page that shows why."""
    return Probe(method, path, who, form=form, says=NUL_REFUSED)


def loose(method: str, path: str, who: str = "nobody", *, expect: int) -> Probe:
    """Only the status is read, and one short line may be logged."""
    return Probe(method, path, who, expect=expect, says=None, quiet=False)


def probes(endpoint: str, event: int) -> list[Probe]:
    """Every route, with a NUL where a sender or an operator could put one."""
    api, console = "api", "console"
    return [
        # The public route, beneath Flask: a path that cannot be an endpoint id.
        unknown("POST", "/hooks/%00", json={"id": "evt_1"}),
        unknown("POST", f"/hooks/{endpoint}%00"),
        unknown("GET", "/hooks/%00?hub.mode=subscribe&hub.verify_token=x&hub.challenge=1"),
        Probe("HEAD", "/hooks/%00", expect=404, says=None),  # no body to say why
        unknown("PUT", "/hooks/%00"),
        # Stripe has no GET handshake: the query is not read.
        Probe("GET", f"/hooks/{endpoint}?hub.mode=%00", expect=405, says="method_not_allowed"),
        # The probes and /metrics.
        Probe("GET", "/livez?x=%00"),
        Probe("GET", "/readyz?%00"),
        Probe("GET", "/healthz/%00"),
        Probe("GET", "/metrics?name[]=%00", api),
        # The admin API: endpoint ids, ordering keys, filters, ids and pages.
        Probe("GET", "/admin/endpoints/%00/ordering", api),
        Probe("PUT", "/admin/endpoints/%00/ordering", api, json={"policy": "serial"}),
        Probe("POST", "/admin/endpoints/%00/keys/release", api, json={"key": "k", "reason": "r"}),
        Probe("POST", f"/admin/endpoints/{endpoint}/keys/release", api, json={"key": "k\x00"}),
        Probe("GET", "/admin/events?endpoint=%00", api),
        Probe("GET", "/admin/events?type=a%00b", api),
        Probe("GET", "/admin/events?external_id=%00", api),
        Probe("GET", "/admin/events?provider=%00&status=dead", api),
        Probe("GET", "/admin/events?%00=1", api),
        Probe("GET", "/admin/events/%00", api),
        Probe("POST", "/admin/events/1%00/replay", api, json={"reason": "r"}),
        Probe("POST", "/admin/replays", api, json={"dry_run": True, "endpoint": "\x00"}),
        Probe("POST", "/admin/replays", api, json={"dry_run": True, "type": "\ud800"}),
        Probe("GET", "/admin/replays/%00", api),
        Probe("GET", "/admin/keys/blocked?limit=%00", api),
        Probe("GET", "/admin/audit?before=%00", api),
        Probe("GET", "/admin/%00", api),
        # The console: the same, and its forms.
        page("GET", "/admin/console/endpoints/%00", console),
        page("GET", f"/admin/console/endpoints/{endpoint}?tab=%00", console),
        page("POST", "/admin/console/endpoints/%00/enabled", console, {"enabled": "true"}),
        page(
            "POST",
            "/admin/console/endpoints/%00/ordering",
            console,
            {"policy": "serial", "dead": "park", "hold_seconds": "0", "key_path": ""},
        ),
        page(
            "POST",
            f"/admin/console/endpoints/{endpoint}/ordering",
            console,
            {"policy": "fifo", "dead": "park", "hold_seconds": "0", "key_path": "a\x00"},
        ),
        page("POST", "/admin/console/endpoints/%00/secrets", console, {"secret": "s"}),
        page("POST", f"/admin/console/endpoints/{endpoint}/secrets", console, {"secret": "\x00"}),
        page("POST", f"/admin/console/endpoints/{endpoint}/secrets/%00/remove", console, {}),
        page(
            "POST",
            "/admin/console/endpoints/%00/keys/release",
            console,
            {"key": "k", "reason": "r"},
        ),
        page(
            "POST",
            f"/admin/console/endpoints/{endpoint}/keys/release",
            console,
            {"key": "k\x00", "reason": "r"},
        ),
        page("GET", "/admin/console/events?endpoint=%00", console),
        page("GET", "/admin/console/events?type=%00&before=%00", console),
        page("GET", "/admin/console/replays/new?external_id=%00", console),
        page("POST", "/admin/console/replays", console, {"type": "x", "reason": "\x00"}),
        page("POST", f"/admin/console/events/{event}/replay", console, {"reason": "a\x00"}),
        page("GET", "/admin/console/audit?before=%00", console),
        # No console route matches: the app's own JSON answer.
        Probe("GET", "/admin/console/%00", console),
        # Signing in: a name is kept in the session and written into the audit log later.
        page("POST", "/admin/console/login", "nobody", {"name": "a\x00", "token": TOKEN}),
        page("GET", "/admin/console/login?next=/admin/console/%00", "nobody"),
        page("GET", "/admin/console/keys?%00", "nobody"),
    ]


def invalid_utf8() -> list[Probe]:
    """Invalid UTF-8, a lone surrogate's bytes among it: read as text the database holds
    (U+FFFD in the path, the escapes kept in the query and form), so answered as any
    unknown name or unmatched filter is."""
    api, console = "api", "console"
    return [
        loose("POST", "/hooks/%ff", expect=404),
        loose("GET", "/hooks/%ed%a0%80?hub.mode=subscribe", expect=404),
        loose("GET", "/admin/events?type=%ed%a0%80", api, expect=200),
        loose("GET", "/admin/endpoints/%ff/ordering", api, expect=404),
        loose("GET", "/admin/console/endpoints/%ed%a0%80", console, expect=404),
        loose("GET", "/admin/console/events?external_id=%ff", console, expect=200),
    ]


def signed_in_session(base: str) -> tuple[requests.Session, str]:
    """A console session signed in through the real server, and a CSRF token of it."""
    session = requests.Session()
    page = session.get(f"{base}/admin/console/login", timeout=10)
    token = csrf_of_text(page.text)
    answer = session.post(
        f"{base}/admin/console/login",
        data={"name": "Grace", "token": TOKEN, "csrf_token": token},
        allow_redirects=False,
        timeout=10,
    )
    assert answer.status_code == 302, answer.text
    return session, csrf_of_text(session.get(f"{base}/admin/console/audit", timeout=10).text)


def csrf_of_text(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found[1]


def send(base: str, probe: Probe, console: tuple[requests.Session, str]) -> requests.Response:
    session, token = console if probe.who == "console" else (requests.Session(), "")
    headers = BEARER if probe.who == "api" else {}
    form = probe.form
    if form is not None and probe.who == "console":
        form = {**form, "csrf_token": token}
    if probe.path.startswith("/admin/console/login") and probe.method == "POST":
        login = session.get(f"{base}/admin/console/login", timeout=10)
        form = {**(form or {}), "csrf_token": csrf_of_text(login.text)}
    return session.request(
        probe.method,
        base + probe.path,
        data=form,
        json=probe.json,
        headers=headers,
        allow_redirects=False,
        timeout=10,
    )


def is_json(answer: requests.Response) -> bool:
    return answer.headers.get("Content-Type") == "application/json"


def what_it_says(answer: requests.Response) -> str:
    """A JSON answer's `error` field, or the message a console error page shows."""
    if not answer.content:  # HEAD
        return ""
    if is_json(answer):
        return str(answer.json().get("error"))
    # (console/error.html; a message flashed earlier would come before it)
    shown = re.search(r'did not work</h1>\s*<p class="flash error">(.*?)</p>', answer.text, re.S)
    return html.unescape(shown[1]) if shown else answer.text[:200]


def answered_as_expected(probe: Probe, answer: requests.Response) -> bool:
    if answer.status_code != probe.expect:
        return False
    if probe.says is None:
        return True
    # A page's message also says where the NUL was.
    said = what_it_says(answer)
    return said == probe.says if is_json(answer) else probe.says in said


def logged_as_allowed(probe: Probe, lines: list[str]) -> bool:
    if probe.quiet:
        return lines == []
    return len(lines) <= 1 and all(len(line) <= SHORT_LINE for line in lines)


def tried(base: str, probe: Probe, console: tuple[requests.Session, str], web: Proc) -> str:
    """What was wrong with the answer to ``probe`` or with what it logged; "" if nothing."""
    before = web.log_path.stat().st_size
    answer = send(base, probe, console)
    lines = web.log_path.read_bytes()[before:].decode(errors="replace").splitlines()
    if answered_as_expected(probe, answer) and logged_as_allowed(probe, lines):
        return ""
    shown = probe.form or probe.json or ""
    return (
        f"{probe.method} {probe.path} {shown!r}: {answer.status_code} "
        f"{what_it_says(answer)!r}, {len(lines)} log lines"
    )


@pytest.mark.slow
def test_a_nul_anywhere_in_a_path_or_parameter_is_refused_with_its_reason_and_logs_nothing(
    procs, proc_settings, runtime
):
    base, _, web = start_procfile_web(procs, proc_settings)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_bad_bytes")
    stored = requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET), timeout=10
    )
    assert stored.status_code == 200, stored.text
    console = signed_in_session(base)
    event = stored.json()["events"][0]["id"]

    start = web.log_path.stat().st_size
    tries = [tried(base, probe, console, web) for probe in probes(endpoint, event)]
    # Nor a line written after an answer, between two probes.
    logged = web.log_path.read_bytes()[start:].decode(errors="replace")
    tries += [tried(base, probe, console, web) for probe in invalid_utf8()]

    wrong = [w for w in tries if w]
    assert wrong == [], "\n".join(wrong) + "\n" + web.log()[-3000:]
    assert logged == "", logged[-3000:]
    assert "Traceback" not in web.log(), web.log()[-3000:]


@pytest.mark.parametrize("text", ["a\x00b", "\ud800"], ids=["nul", "lone-surrogate"])
def test_text_the_database_refuses_that_reaches_it_anyway_is_400_in_one_line(
    app, runtime, caplog, text
):
    """The net beneath the check: a route that hands PostgreSQL a NUL or a lone surrogate
    from a JSON body (each route checks its own today) is answered 400, not 500, and
    logs one line, no traceback."""

    def find_endpoint() -> Any:
        with runtime.session_factory() as session:
            session.execute(select(Endpoint.id).where(Endpoint.name == request.json["name"]))
        return {}

    app.add_url_rule("/test/find-endpoint", view_func=find_endpoint, methods=["POST"])

    answer = app.test_client().post("/test/find-endpoint", json={"name": text})

    assert (answer.status_code, answer.json["error"]) == (400, "bad_parameter")
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("WARNING", "find_endpoint: text the database cannot hold reached it, answered 400")
    ]
