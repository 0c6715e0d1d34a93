"""The console without a browser: who may use it (the admin token's session, a trusted
proxy's header, nobody when neither is set), its cookie, and event pages that stay on an
index at any table size."""

from __future__ import annotations

import hashlib
import json
import re
import time
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from sqlalchemy import event, text

from hooklatch.events.browse import EventFilter, page
from tests.support.console import TOKEN, csrf_of, signed_in
from tests.support.pipeline import deliver, make_endpoint
from tests.support.signing import stripe_event, stripe_headers


def test_the_console_is_off_without_a_token_or_a_proxy(app_with):
    client = app_with(admin_token=None).test_client()
    answer = client.get("/admin/console/")
    assert answer.status_code == 404
    assert "The console is off" in answer.get_data(as_text=True)


def test_a_wrong_token_signs_nobody_in(app_with):
    client = app_with().test_client()
    form = client.get("/admin/console/login")
    answer = client.post(
        "/admin/console/login", data={"name": "x", "token": "nope", "csrf_token": csrf_of(form)}
    )
    assert answer.status_code == 401
    assert client.get("/admin/console/").status_code == 302  # back to the sign-in


def test_the_session_cookie_is_httponly_strict_secure_over_https_and_expires(app_with):
    _, answer = signed_in(app_with(public_url="https://hooks.example.com"))
    cookie = answer.headers["Set-Cookie"]
    for part in ("HttpOnly", "SameSite=Strict", "Secure", "Path=/admin", "Expires="):
        assert part in cookie, cookie
    _, plain = signed_in(app_with())
    assert "Secure" not in plain.headers["Set-Cookie"]

    client, _ = signed_in(app_with(admin_session_hours=1 / 3600))  # one second
    assert client.get("/admin/console/").status_code == 200
    time.sleep(2.2)
    assert client.get("/admin/console/").status_code == 302


def test_a_trusted_proxy_names_who_acts_and_nobody_else_can(app_with, runtime):
    app = app_with(
        admin_token=None, admin_proxy_header="X-Forwarded-Email", admin_proxy_ips=("127.0.0.1",)
    )
    endpoint, _ = make_endpoint(runtime)
    client = app.test_client()
    who = {"X-Forwarded-Email": "lin@example.com"}
    page_ = client.get(f"/admin/console/endpoints/{endpoint}", headers=who)
    assert page_.status_code == 200
    answer = client.post(
        f"/admin/console/endpoints/{endpoint}/enabled",
        data={"enabled": "false", "csrf_token": csrf_of(page_)},
        headers=who,
    )
    assert answer.status_code == 302
    with runtime.engine.connect() as c:
        actor = c.execute(text("SELECT actor FROM audit_log")).scalar_one()
    assert actor == "lin@example.com (console)"

    # The same header from an address that is not the proxy's names nobody.
    elsewhere = client.get(
        "/admin/console/", headers=who, environ_base={"REMOTE_ADDR": "203.0.113.9"}
    )
    assert elsewhere.status_code == 302 and "/admin/console/login" in elsewhere.location


def test_sign_in_goes_back_only_to_a_console_page(app_with):
    client = app_with().test_client()
    form = client.get("/admin/console/login")
    answer = client.post(
        "/admin/console/login?next=https://evil.example/admin/console/",
        data={"name": "x", "token": TOKEN, "csrf_token": csrf_of(form)},
    )
    assert answer.location == "/admin/console/"


@pytest.mark.parametrize(
    "target",
    [
        "/admin/console/events\r\nSet-Cookie: hooklatch_console=stolen",
        "/admin/console/\nLocation: https://evil.example/",
        "/admin/console/events?type=\x85",
        "/admin/console/\u202eevents",
        "/admin/console/ events",
        "/admin/console/\\evil.example",
        "/admin/console/../../hooks/x",
        "/admin/console/%2e%2e/%2E%2E/metrics",
        "//evil.example/admin/console/",
        "javascript:alert(1)//admin/console/",
    ],
    ids=repr,
)
def test_sign_in_replaces_a_next_that_is_not_a_plain_console_path_by_the_start_page(
    app_with, target
):
    """Not a 500 (a CR or LF cannot go in a Location header), not a header of the
    sender's, not a page outside the console: the start page."""
    client = app_with().test_client()
    form = client.get("/admin/console/login")
    answer = client.post(
        "/admin/console/login?" + urlencode({"next": target}),
        data={"name": "x", "token": TOKEN, "csrf_token": csrf_of(form)},
    )
    assert (answer.status_code, answer.headers.getlist("Location")) == (302, ["/admin/console/"])
    assert "stolen" not in str(answer.headers)


def test_sign_in_goes_back_to_the_console_page_that_asked_for_it(app_with, runtime):
    endpoint, _ = make_endpoint(runtime)
    client = app_with().test_client()
    asked = client.get(f"/admin/console/events?endpoint={endpoint}&type=invoice.*")
    assert asked.status_code == 302
    form = client.get(asked.location)
    answer = client.post(
        asked.location, data={"name": "x", "token": TOKEN, "csrf_token": csrf_of(form)}
    )
    assert answer.location == f"/admin/console/events?endpoint={endpoint}&type=invoice.*"


def test_pages_send_a_strict_policy_and_refuse_framing(app_with):
    client, _ = signed_in(app_with())
    answer = client.get("/admin/console/events")
    policy = answer.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "'unsafe-inline'" not in policy
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert answer.headers["Cache-Control"] == "no-store"
    # No inline script or style in any page: the policy would block it.
    body = answer.get_data(as_text=True)
    assert not re.search(r"<script(?![^>]*\bsrc=)", body) and " style=" not in body


def test_the_body_downloads_as_the_exact_bytes_received(app_with, runtime, client):
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_download")
    console, _ = signed_in(app_with())
    answer = console.get(f"/admin/console/events/{event_id}/body")
    assert answer.headers["Content-Disposition"] == f'attachment; filename="event-{event_id}.body"'
    assert answer.mimetype == "application/octet-stream"
    with runtime.engine.connect() as c:
        stored = c.execute(text("SELECT body FROM events WHERE id = :i"), {"i": event_id}).scalar()
    assert answer.get_data() == bytes(stored)
    assert json.loads(answer.get_data())["id"] == "evt_download"


def test_a_body_with_a_key_given_twice_is_shown_as_received(app_with, runtime, client):
    """Re-indented, it would show one amount of two: the page must not show a body other
    than the one the sender sent."""
    import html

    from tests.support.pipeline import post_json
    from tests.support.signing import stripe_headers

    endpoint, [secret] = make_endpoint(runtime)
    body = b'{"id": "evt_twice", "type": "invoice.paid", "created": 1, "object": "event", '
    body += b'"data": {"object": {"amount": 1, "amount": 1000}}}'
    stored = post_json(client, endpoint, body, stripe_headers(body, secret))
    assert stored.status_code == 200, stored.json
    console, _ = signed_in(app_with())

    page_ = console.get(f"/admin/console/events/{stored.json['events'][0]['id']}")

    assert '"amount": 1, "amount": 1000' in html.unescape(page_.get_data(as_text=True))


# -- event pages at scale ---------------------------------------------------------------

ROWS = 200_000


@pytest.fixture
def many_events(runtime):
    """ROWS events written by SQL (a best case for the table's shape, not for ingest),
    one in 500 dead, then analysed as autovacuum would."""
    endpoint, _ = make_endpoint(runtime)
    with runtime.engine.begin() as c:
        c.execute(
            text(
                "INSERT INTO events (endpoint_id, provider, external_id, type, status, attempts,"
                " body, headers, body_sha256, received_at, next_attempt_at,"
                " mismatched_duplicates) SELECT :e, 'stripe', 'evt_' || g,"
                " CASE WHEN g % 3 = 0 THEN 'invoice.paid' ELSE 'customer.updated' END,"
                " CASE WHEN g % 500 = 0 THEN 'dead' ELSE 'processed' END, 1, '\\x7b7d', '{}',"
                " 'x', now() - (g || ' seconds')::interval, now(), 0"
                " FROM generate_series(1, :n) g"
            ),
            {"e": endpoint, "n": ROWS},
        )
        c.execute(text("ANALYZE events"))
    return endpoint


def plans(runtime, chosen, before=None):
    """The plan of each statement a page runs, as PostgreSQL would run it."""
    seen = []

    def record(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().startswith("SELECT events.id"):
            cursor.execute("EXPLAIN (FORMAT JSON) " + statement, parameters)
            seen.append(cursor.fetchone()[0])

    event.listen(runtime.engine, "before_cursor_execute", record)
    try:
        with runtime.session_factory() as session:
            rows, _ = page(session, chosen, before=before)
    finally:
        event.remove(runtime.engine, "before_cursor_execute", record)
    return rows, seen


def scans(plan) -> list[tuple[str, str | None]]:
    found = []

    def walk(node):
        if "Scan" in node["Node Type"]:
            found.append((node["Node Type"], node.get("Index Name")))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found


PLANS = [
    (EventFilter(), "pk_events"),
    (EventFilter(status="dead"), "ix_events_dead"),
    (EventFilter(external_id="evt_123457"), "uq_events_endpoint_id_external_id_variant"),
    (EventFilter(type="invoice.*"), "pk_events"),
    (EventFilter(status="processed", provider="stripe"), "pk_events"),
]


def test_a_page_of_events_reads_an_index_at_any_depth(runtime, many_events):
    for chosen, index in PLANS:
        rows, [first] = plans(runtime, chosen)
        assert rows, chosen
        assert all(kind != "Seq Scan" for kind, _ in scans(first)), (chosen, scans(first))
        assert index in {name for _, name in scans(first)}, (chosen, scans(first))
        # A page deep in the table is planned the same way (keyset, not OFFSET).
        _, [deep] = plans(runtime, chosen, before=rows[-1].id // 3 or 1)
        assert all(kind != "Seq Scan" for kind, _ in scans(deep)), (chosen, scans(deep))


def test_copy_as_curl_sends_the_delivery_again_and_it_verifies(app_with, runtime, client):
    """The command, run against the receiver (here its test client), verifies again:
    answered duplicate, not refused."""
    import html
    import shlex
    from urllib.parse import urlsplit

    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_curl")
    console, _ = signed_in(app_with())
    page_ = console.get(f"/admin/console/events/{event_id}").get_data(as_text=True)
    shown = re.search(r'<pre class="curl" id="curl">(.*?)</pre>', page_, re.S)
    assert shown, "no curl command on the page"
    command = html.unescape(shown[1])
    words = shlex.split(command)
    assert words[:4] == ["curl", "-sS", "-X", "POST"]
    url, rest = words[4], words[5:]
    headers = dict(rest[i + 1].split(": ", 1) for i in range(0, len(rest) - 2, 2))
    assert rest[-2] == "--data-raw"
    assert "stripe-signature" in headers and "host" not in headers

    again = client.post(urlsplit(url).path, data=rest[-1].encode(), headers=headers)

    assert again.status_code == 200, again.json
    assert (again.json["status"], again.json["events"][0]["id"]) == ("duplicate", event_id)


def run_curl_against_a_recorder(command: str) -> bytes:
    """Run ``command`` with the real curl, its URL pointed at a local server that keeps
    the body it is sent; returns that body."""
    import http.server
    import shlex
    import shutil
    import subprocess
    import threading

    assert shutil.which("curl"), "curl is needed (apt-get install curl)"
    received: list[bytes] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        words = shlex.split(command)
        words[4] = f"http://127.0.0.1:{server.server_port}/hooks/x"
        subprocess.run(words, check=True, timeout=10, capture_output=True)
    finally:
        server.shutdown()
        server.server_close()
    return received[0]


def test_copy_as_curl_sends_a_body_starting_with_at_as_data_never_a_local_file(tmp_path):
    """With --data-binary, curl would read the file a hostile body names and post it."""
    from hooklatch.admin.console.pages import _curl

    secret_file = tmp_path / "netrc"
    secret_file.write_text("machine example.com password hunter2")
    body = f"@{secret_file}".encode()
    command = _curl("http://h", "ep_1", 7, {"content-type": "text/plain"}, body)

    assert command is not None and "--data-raw" in command
    assert run_curl_against_a_recorder(command) == body


@pytest.mark.parametrize(
    "body",
    [b'{"a": "line\r\nbreak"}', b'{"a": "\x1b[201~rm -rf ~\x15"}', b"\xff\xfe binary"],
    ids=["carriage-return", "escape-sequence", "not-utf8"],
)
def test_copy_as_curl_sends_a_body_a_paste_would_change_from_the_downloaded_file(body):
    from hooklatch.admin.console.pages import _curl

    command = _curl("http://h", "ep_1", 7, {"content-type": "application/json"}, body)

    assert command is not None
    assert command.endswith("--data-binary @event-7.body")
    assert "\x1b" not in command and "\r" not in command


def shell_words(command: str) -> list[bytes]:
    """The words bash makes of ``command`` (curl's arguments), as the bytes curl would get."""
    import subprocess

    assert command.startswith("curl ")
    script = "words() { printf '%s\\0' \"$@\"; }; words " + command.removeprefix("curl ")
    ran = subprocess.run(["bash", "-c", script], capture_output=True, timeout=10, check=True)
    return ran.stdout.split(b"\0")[:-1]


def test_copy_as_curl_sends_each_header_byte_as_received_and_shows_only_printable_ascii(
    app_with, runtime, client
):
    """Header values are bytes (WSGI hands them over as Latin-1): UTF-8 text, a C1 control
    (U+0085, which a terminal may act on) and a right-to-left override go into the command
    as escapes, and bash turns them back into exactly the bytes received."""
    import html

    endpoint, _ = make_endpoint(runtime)
    received = "caf\u00e9 \x85 \u202e".encode() + b" \xff"
    body = stripe_event("evt_curl_bytes")
    headers = {**stripe_headers(body, "whsec_test_secret"), "X-Note": received.decode("latin-1")}
    stored = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert stored.status_code == 200, stored.json
    console, _ = signed_in(app_with())
    page_ = console.get(f"/admin/console/events/{stored.json['events'][0]['id']}")
    shown = re.search(r'<pre class="curl" id="curl">(.*?)</pre>', page_.get_data(as_text=True))
    assert shown, "no curl command on the page"
    command = html.unescape(shown[1])

    assert all(" " <= c <= "~" for c in command), command
    words = shell_words(command)
    assert b"x-note: " + received in words
    sent = [words[i + 1] for i, word in enumerate(words) if word == b"-H"]
    assert b"stripe-signature: " + headers["Stripe-Signature"].encode() in sent
    assert words[-2:] == [b"--data-raw", body]


def test_every_byte_but_nul_survives_the_curl_commands_quoting_through_bash():
    from hooklatch.admin.console.pages import _shell_word

    every = bytes(range(1, 256)) + b"\\x41'\\'x"  # and escapes that must stay text

    assert shell_words(f"curl {_shell_word(every)} {_shell_word(b'plain')}") == [every, b"plain"]


def test_a_sign_in_ends_at_its_age_however_busy_the_console(app_with):
    age = 4.0
    signed_at = time.monotonic()
    client, _ = signed_in(app_with(admin_session_hours=age / 3600))
    for _ in range(3):  # used all along: a sliding expiry would end 4 s after the last use
        assert client.get("/admin/console/").status_code == 200
        time.sleep(0.8)
    time.sleep(max(0.0, signed_at + age + 0.5 - time.monotonic()))
    assert client.get("/admin/console/").status_code == 302


def test_a_cookie_copied_before_sign_out_opens_nothing_after_it(app_with, runtime):
    """Sign-out ends the session on the server: a copy of its cookie taken before neither
    reads a page nor adds a secret afterwards, even with a CSRF token of that session."""
    endpoint, _ = make_endpoint(runtime)
    app = app_with()
    client, _ = signed_in(app)
    csrf = csrf_of(client.get(f"/admin/console/endpoints/{endpoint}"))
    copied = client.get_cookie("hooklatch_console", path="/admin").value
    thief = app.test_client()
    thief.set_cookie("hooklatch_console", copied, path="/admin")
    assert thief.get(f"/admin/console/endpoints/{endpoint}").status_code == 200  # a good copy

    assert client.post("/admin/console/logout", data={"csrf_token": csrf}).status_code == 302

    read = thief.get(f"/admin/console/endpoints/{endpoint}")
    assert read.status_code == 302 and read.location.startswith("/admin/console/login")
    added = thief.post(
        f"/admin/console/endpoints/{endpoint}/secrets",
        data={"secret": "whsec_planted_after_sign_out", "csrf_token": csrf},
    )
    assert added.status_code == 302 and added.location.startswith("/admin/console/login")
    with runtime.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM endpoint_secrets")).scalar() == 1
        assert c.execute(text("SELECT count(*) FROM audit_log")).scalar() == 0
        assert c.execute(text("SELECT count(*) FROM console_sessions")).scalar() == 0


def test_a_sign_in_is_stored_as_a_hash_of_its_cookies_token_never_the_token(app_with, runtime):
    app = app_with()
    client, _ = signed_in(app)
    cookie = client.get_cookie("hooklatch_console", path="/admin").value
    token = app.session_interface.get_signing_serializer(app).loads(cookie)["console"]["token"]
    assert len(token) >= 40  # 32 random bytes
    with runtime.engine.connect() as c:
        [row] = c.execute(text("SELECT * FROM console_sessions")).mappings().all()
    assert row["token_sha256"] == hashlib.sha256(token.encode()).hexdigest()
    assert row["name"] == "Grace"
    assert row["expires_at"] - row["signed_in_at"] == timedelta(hours=8)
    assert token not in repr(dict(row))


def test_a_name_with_control_characters_signs_in_under_its_printable_part(app_with, runtime):
    client = app_with().test_client()
    form = client.get("/admin/console/login")
    answer = client.post(
        "/admin/console/login",
        # (A NUL in any form field is refused before any view: test_bad_bytes.py.)
        data={"name": " Gr\x07ace\r\n\x1b[2J", "token": TOKEN, "csrf_token": csrf_of(form)},
    )
    assert answer.status_code == 302
    with runtime.engine.connect() as c:
        assert c.execute(text("SELECT name FROM console_sessions")).scalar_one() == "Grace[2J"


def test_an_empty_secret_is_refused_for_a_provider_that_chooses_its_own(app_with, runtime):
    endpoint, _ = make_endpoint(runtime)  # Stripe shows its secret; none is generated
    client, _ = signed_in(app_with())
    page_ = client.get(f"/admin/console/endpoints/{endpoint}")
    answer = client.post(
        f"/admin/console/endpoints/{endpoint}/secrets",
        data={"secret": "", "csrf_token": csrf_of(page_)},
    )
    assert answer.status_code == 400
    assert "paste the one it shows" in answer.get_data(as_text=True)
    with runtime.engine.connect() as c:
        assert c.execute(text("SELECT count(*) FROM endpoint_secrets")).scalar() == 1


def test_a_filter_that_would_read_the_whole_table_is_stopped_with_advice(
    runtime, many_events, monkeypatch
):
    from hooklatch.errors import BadRequest
    from hooklatch.events import browse

    monkeypatch.setattr(browse, "BROWSE_TIMEOUT_MS", 1)  # the table is small; its limit too
    with runtime.session_factory() as session, pytest.raises(BadRequest) as refused:
        page(session, EventFilter(type="never.seen.*"))
    assert refused.value.reason == "filter_too_broad"
    assert "since, until" in refused.value.message
