"""Guessing the admin token: failed attempts are counted per client address in the
database, so that every web process shares them; enough of them lock the address out
of the admin API, /metrics and the console's sign-in alike, the right token included,
with one log line per lockout."""

from __future__ import annotations

import http.client
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import requests

from hooklatch import create_app
from hooklatch.errors import TooManyAttempts
from hooklatch.operations import access
from hooklatch.operations.access import TokenGuard
from tests.support.console import csrf_of, signed_in
from tests.support.database import count, sqlite_settings
from tests.support.processes import (
    hooklatch_cmd,
    on_path,
    process_env,
    procfile_command,
    start_gunicorn,
)
from tests.support.tokens import ADMIN_TOKEN, AUTH

WRONG = {"Authorization": "Bearer guess-" + "0123456789abcdef" * 3}
ATTACKER, NEIGHBOUR = "203.0.113.7", "198.51.100.4"
LOCKED_OUT = "locked out"


def api(app, headers, address):
    return app.test_client().get("/admin/events", headers=headers, environ_base=address_of(address))


def scrape(app, headers, address):
    return app.test_client().get("/metrics", headers=headers, environ_base=address_of(address))


def sign_in(app, token, address):
    client = app.test_client()
    environ = address_of(address)
    form = client.get("/admin/console/login", environ_base=environ)
    return client.post(
        "/admin/console/login",
        data={"name": "Mallory", "token": token, "csrf_token": csrf_of(form)},
        environ_base=environ,
    )


def address_of(address):
    return {"REMOTE_ADDR": address}


def lockout_lines(caplog):
    return [r.getMessage() for r in caplog.records if LOCKED_OUT in r.getMessage()]


@pytest.fixture
def apps_at(settings, router):
    """Apps on one database whose clock is ``clock.now``, which a test moves on."""
    clock = SimpleNamespace(now=datetime(2026, 11, 26, 12, 0, tzinfo=UTC))
    made = []

    def make(**changes):
        app = create_app(replace(settings, **changes), router=router, clock=lambda: clock.now)
        made.append(app)
        return app

    yield clock, make
    for app in made:
        app.extensions["hooklatch"].dispose()


def test_failures_on_two_processes_lock_the_address_out_of_every_face(apps_at, caplog):
    caplog.set_level(logging.WARNING)
    clock, make = apps_at
    first, second = (make(admin_lockout_failures=6, admin_lockout_seconds=900) for _ in range(2))
    guesses = [
        lambda app: api(app, WRONG, ATTACKER),
        lambda app: scrape(app, WRONG, ATTACKER),
        lambda app: sign_in(app, "guess-" + "fedcba9876543210" * 3, ATTACKER),
    ]
    answers = [guesses[n % 3]((first, second)[n % 2]).status_code for n in range(5)]
    assert answers == [401, 401, 401, 401, 401]
    sixth = sign_in(second, "another-guess-" + "13579bdf" * 5, ATTACKER)
    assert sixth.status_code == 429
    # The other process learns of the lockout from the next failure it counts there.
    assert api(first, WRONG, ATTACKER).status_code == 429

    # Both processes refuse the right token from that address now, on every face.
    for app in (first, second):
        for answer in (
            api(app, AUTH, ATTACKER),
            scrape(app, AUTH, ATTACKER),
            sign_in(app, ADMIN_TOKEN, ATTACKER),
        ):
            assert answer.status_code == 429, answer.get_data(as_text=True)
            assert int(answer.headers["Retry-After"]) == 900
    refused = api(second, AUTH, ATTACKER)
    assert refused.json["error"] == "too_many_attempts"
    assert ADMIN_TOKEN not in refused.get_data(as_text=True)
    [line] = lockout_lines(caplog)
    assert ATTACKER in line and "6 failed admin-token attempts" in line and "until" in line
    assert ADMIN_TOKEN not in caplog.text and "guess-" not in caplog.text
    # Another address is not concerned.
    assert api(first, AUTH, NEIGHBOUR).status_code == 200
    assert scrape(second, AUTH, NEIGHBOUR).status_code == 200

    clock.now += timedelta(seconds=901)  # the lockout's period is over
    assert api(first, AUTH, ATTACKER).status_code == 200
    assert scrape(second, AUTH, ATTACKER).status_code == 200
    assert sign_in(first, ADMIN_TOKEN, ATTACKER).status_code == 302
    assert len(lockout_lines(caplog)) == 1


class CountedTokens(list):
    """The tokens a check compares against, counting the checks that compared them."""

    def __init__(self, *tokens):
        super().__init__(tokens)
        self.compared = 0
        self.lock = threading.Lock()

    def __iter__(self):
        with self.lock:
            self.compared += 1
        return super().__iter__()


def test_guesses_in_flight_at_once_are_compared_no_more_than_the_limit_allows(app_with):
    """Forty guesses at once from one address: the lockout is counted in the database, so
    a process that compared each as it came would compare every one already in flight
    before the failures that lock the address out were counted."""
    app = app_with(admin_lockout_failures=5, admin_lockout_seconds=900)
    guard = TokenGuard(app.extensions["hooklatch"])
    tokens = CountedTokens(ADMIN_TOKEN)
    start = threading.Barrier(40)

    def guess(n):
        start.wait()
        try:
            return guard.check(f"guess-{n:04d}-" + "0123456789abcdef" * 2, tokens, address=ATTACKER)
        except TooManyAttempts:
            return "locked out"

    with ThreadPoolExecutor(40) as pool:
        answers = list(pool.map(guess, range(40)))
    assert answers.count(False) == 4 and answers.count("locked out") == 36
    assert tokens.compared == 5  # the fifth locked it out; none after it was compared
    with pytest.raises(TooManyAttempts):
        guard.check(ADMIN_TOKEN, tokens, address=ATTACKER)
    assert tokens.compared == 5


def test_a_process_whose_memory_of_lockouts_is_full_asks_the_database(app_with, monkeypatch):
    """Lockouts past what a process remembers (someone locking out many addresses) are
    read from the database before a token is compared: the right one too is refused."""
    monkeypatch.setattr(access, "REMEMBERED", 2)
    app = app_with(admin_lockout_failures=2, admin_lockout_seconds=900)
    for address in ("198.51.100.1", "198.51.100.2", ATTACKER):
        assert [api(app, WRONG, address).status_code for _ in range(2)] == [401, 429]
    assert api(app, AUTH, ATTACKER).status_code == 429  # not remembered: read
    assert api(app, AUTH, NEIGHBOUR).status_code == 200


def test_a_right_token_never_waits_for_another_addresses_failure(app_with, runtime):
    """Each address takes its turn alone: a wrong token whose failure cannot be written
    (its row locked by someone else) holds up its own address only."""
    app = app_with(admin_lockout_failures=5)
    guard = TokenGuard(app.extensions["hooklatch"])
    api(app, WRONG, ATTACKER)  # its row exists
    with runtime.engine.connect() as holder:
        holder.exec_driver_sql(
            "SELECT 1 FROM token_failures WHERE address = %s FOR UPDATE", (ATTACKER,)
        )
        with ThreadPoolExecutor(2) as pool:
            stuck = pool.submit(
                guard.check, "guess-" + "0123456789abcdef" * 2, [ADMIN_TOKEN], address=ATTACKER
            )
            time.sleep(0.2)  # it waits for the row

            def others():  # enough addresses that locks shared by hash would put one beside it
                return all(
                    guard.check(ADMIN_TOKEN, [ADMIN_TOKEN], address=f"10.0.{n // 250}.{n % 250}")
                    for n in range(1000)
                )

            answered = pool.submit(others)
            try:
                assert answered.result(timeout=10)
                assert not stuck.done()
            finally:
                holder.rollback()
            assert stuck.result(timeout=10) is False


def test_an_ipv6_client_is_counted_by_its_64_bit_prefix(app_with):
    app = app_with(admin_lockout_failures=3)
    for host in ("2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"):
        api(app, WRONG, host)
    assert api(app, AUTH, "2001:db8:1:2:abcd::1").status_code == 429
    assert api(app, AUTH, "2001:db8:1:3::1").status_code == 200  # the next /64


def test_a_process_that_saw_a_lockout_refuses_from_memory_without_the_database(app_with, runtime):
    app = app_with(admin_lockout_failures=2, admin_lockout_seconds=60)
    for _ in range(2):
        api(app, WRONG, ATTACKER)
    assert count(runtime, "SELECT count(*) FROM token_failures WHERE locked_until IS NOT NULL")
    with runtime.engine.begin() as c:
        c.exec_driver_sql("DELETE FROM token_failures")
    assert api(app, AUTH, ATTACKER).status_code == 429
    # A process that never saw it compares the token, which is right: no database work.
    assert api(app_with(), AUTH, ATTACKER).status_code == 200


def test_requests_without_a_token_are_not_counted(app_with, runtime):
    app = app_with(admin_lockout_failures=2)
    for _ in range(5):
        assert api(app, {}, ATTACKER).status_code == 401
        assert scrape(app, {"Authorization": "Basic x"}, ATTACKER).status_code == 401
    assert api(app, AUTH, ATTACKER).status_code == 200
    assert count(runtime, "SELECT count(*) FROM token_failures") == 0


@pytest.mark.slow
def test_a_flood_of_guesses_on_two_gunicorn_workers_ends_in_one_lockout(procs, settings):
    period = 15.0  # long enough for what is checked during it, on a busy machine
    base, web = start_gunicorn(
        procs,
        settings,
        workers=2,
        HOOKLATCH_ADMIN_LOCKOUT_FAILURES="10",
        HOOKLATCH_ADMIN_LOCKOUT_SECONDS=str(period),
    )

    def guess(_: int) -> int:
        # A new connection each: the two workers share the guesses.
        return requests.get(f"{base}/admin/events", headers=WRONG, timeout=10).status_code

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(guess, range(60)))
    flooded = time.monotonic()  # the lockout began before this
    assert answers.count(401) == 9 and answers.count(429) == 51, answers
    for _ in range(10):
        # A kept-alive connection stays with one worker: once that worker has seen the
        # lockout (from memory, or from the failure it counts now), the right token too
        # is refused there.
        with requests.Session() as connection:
            guessed = connection.get(f"{base}/admin/events", headers=WRONG, timeout=10)
            assert guessed.status_code == 429
            answer = connection.get(f"{base}/admin/events", headers=AUTH, timeout=10)
            assert answer.status_code == 429 and "Retry-After" in answer.headers
            assert connection.get(f"{base}/metrics", headers=AUTH, timeout=10).status_code == 429
    assert from_another_address(base) == 200
    lines = [line for line in web.log().splitlines() if LOCKED_OUT in line]
    assert len(lines) == 1, web.log()
    assert "127.0.0.1" in lines[0] and "10 failed admin-token attempts" in lines[0]

    time.sleep(max(0.0, flooded + period + 0.2 - time.monotonic()))
    assert requests.get(f"{base}/admin/events", headers=AUTH, timeout=10).status_code == 200


def from_another_address(base: str) -> int:
    """The right token from 127.0.0.2 (another loopback address: another client)."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), source_address=("127.0.0.2", 0))
    try:
        connection.request("GET", "/admin/events", headers=AUTH)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.mark.slow
@pytest.mark.parametrize("weak", ["weak-admin-token", "Qx7!" * 10])
def test_a_weak_admin_token_stops_every_process_at_start_without_showing_it(procs, settings, weak):
    env = process_env(settings, HOOKLATCH_ADMIN_TOKEN=weak, HOST="127.0.0.1", PORT="0")
    for name, args in (("web", procfile_command("web")), ("relay", hooklatch_cmd("relay"))):
        started = procs(name, args, on_path(env))
        assert started.popen.wait(timeout=60) != 0
        log = started.log()
        assert "HOOKLATCH_ADMIN_TOKEN is too weak" in log, log
        assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in log, log
        assert weak not in log, log


@pytest.fixture
def on_sqlite(settings, router, tmp_path):
    """An app of the embedded default (SQLite, no Redis), with these lockout settings."""
    apps = []

    def make(**changes):
        apps.append(
            create_app(sqlite_settings(settings, tmp_path / "db", **changes), router=router)
        )
        return apps[-1]

    yield make
    for app in apps:
        app.extensions["hooklatch"].dispose()


def test_the_lockout_and_sign_out_hold_on_the_embedded_default(on_sqlite):
    app = on_sqlite(admin_lockout_failures=2)
    client, _ = signed_in(app)
    csrf = csrf_of(client.get("/admin/console/"))
    copied = client.get_cookie("hooklatch_console", path="/admin").value
    client.post("/admin/console/logout", data={"csrf_token": csrf})
    thief = app.test_client()
    thief.set_cookie("hooklatch_console", copied, path="/admin")
    assert thief.get("/admin/console/").status_code == 302

    assert [api(app, WRONG, ATTACKER).status_code for _ in range(2)] == [401, 429]
    other = on_sqlite()  # another process, same file: learns of it from its next failure
    assert api(other, WRONG, ATTACKER).status_code == 429
    assert api(other, AUTH, ATTACKER).status_code == 429
    assert api(app, AUTH, NEIGHBOUR).status_code == 200


@pytest.mark.slow
def test_behind_the_shipped_nginx_one_guesser_locks_out_only_itself(procs, settings, tmp_path):
    """Every request reaches the web process from nginx's address: counted against that,
    one guesser on the internet would lock every operator and Prometheus out. nginx
    appends the client's address to X-Forwarded-For, which the web process reads from
    HOOKLATCH_TRUSTED_PROXIES only (127.0.0.1 by default), taking the last entry: what a
    client writes in the header itself is never reached."""
    from tests.support.nginx import start_nginx

    upstream, _ = start_gunicorn(procs, settings, workers=1, HOOKLATCH_ADMIN_LOCKOUT_FAILURES="3")
    proxy, _ = start_nginx(procs, tmp_path / "nginx", int(upstream.rsplit(":", 1)[1]))
    guesser, operator = "127.0.0.3", "127.0.0.2"  # two clients of the same nginx
    # The guesser writes another address in the header each time: never read.
    answers = [
        from_address(proxy, guesser, {**WRONG, "X-Forwarded-For": f"198.51.100.{n}"})
        for n in range(5)
    ]
    assert answers == [401, 401, 429, 429, 429]
    assert from_address(proxy, guesser, AUTH) == 429
    assert from_address(proxy, operator, AUTH) == 200
    # Nor can the guesser pass for the operator.
    assert from_address(proxy, guesser, {**AUTH, "X-Forwarded-For": operator}) == 429


def from_address(base: str, source: str, headers: dict[str, str]) -> int:
    """GET /admin/events from the loopback address ``source`` (another client)."""
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), source_address=(source, 0))
    try:
        connection.request("GET", "/admin/events", headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()
