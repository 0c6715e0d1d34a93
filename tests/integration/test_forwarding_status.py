"""`hooklatch status`'s forwarding section: a line per destination (paused or not, its
forwards waiting with the oldest's age, dead, delivered, its last error on one line,
escaped), the same figures in --json, and exit 2 for dead forwards or an old backlog at a
destination that is not paused, as for the other problems.

Destinations are seeded directly (tests.support.forwarding): what status shows of them is
the subject here, not how a kind of destination checks its settings."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import text

from tests.support.cli import run_cli
from tests.support.forwarding_rows import PASSWORD, seed_destination, seed_forwards
from tests.support.pipeline import make_endpoint


def both_alive(runtime):
    """A relay and a worker beating: status has no other problem."""
    now = runtime.clock()
    with runtime.engine.begin() as c:
        for kind in ("relay", "worker"):
            c.execute(
                text(
                    "INSERT INTO heartbeats (id, kind, hostname, pid, started_at, beat_at) "
                    "VALUES (:i, :k, 'host-a', 42, :b, :b)"
                ),
                {"i": f"{kind}/host-a/42", "k": kind, "b": now},
            )


def status_json(settings):
    result = run_cli(settings, "status", "--json", ok=False)
    assert result.exit_code in (0, 2), result.output
    return result.exit_code, json.loads(result.output)


def test_destinations_that_keep_up_or_are_paused_are_no_problem(settings, runtime):
    both_alive(runtime)
    endpoint, _ = make_endpoint(runtime)
    code, figures = status_json(settings)
    assert (code, figures["problems"], figures["destinations"]) == (0, [], [])
    assert "forwarding: no destination" in run_cli(settings, "status").output

    fresh = seed_destination(runtime, "orders", delivered=1234, failed=3)
    held = seed_destination(runtime, "archive", kind="nats", paused=True)
    seed_forwards(runtime, fresh, endpoint, {"pending": 2}, age=timedelta(minutes=2))
    seed_forwards(runtime, held, endpoint, {"pending": 5}, age=timedelta(hours=3))

    code, figures = status_json(settings)

    assert (code, figures["problems"]) == (0, [])
    shown = {d["name"]: d for d in figures["destinations"]}
    assert list(shown) == ["archive", "orders"]
    assert shown["orders"]["id"] == fresh
    assert {k: shown["orders"][k] for k in ("kind", "paused", "pending", "dead")} == {
        "kind": "http",
        "paused": False,
        "pending": 2,
        "dead": 0,
    }
    assert 120 <= shown["orders"]["oldest_pending_seconds"] < 180
    assert (shown["orders"]["delivered"], shown["orders"]["failed_attempts"]) == (1234, 3)
    assert shown["archive"]["paused"] and shown["archive"]["pending"] == 5
    screen = run_cli(settings, "status").output
    assert "forwarding:\n" in screen
    assert "  archive (nats, PAUSED): 5 pending (oldest 3.0 h), 0 dead, 0 delivered" in screen
    assert "  orders (http): 2 pending (oldest 2.0 min), 0 dead, 1234 delivered, " in screen
    assert "3 failed attempts" in screen
    assert PASSWORD not in screen and PASSWORD not in json.dumps(figures)


def test_dead_forwards_and_an_old_backlog_not_paused_are_problems(settings, runtime):
    both_alive(runtime)
    endpoint, _ = make_endpoint(runtime)
    error = "503 from \x1b[31mreceiver\x1b[0m\nretry later\u202e"
    dying = seed_destination(runtime, "ledger", last_error=error, failed=25)
    behind = seed_destination(runtime, "slow\u202eone", rate_limit=0.1)
    seed_forwards(runtime, dying, endpoint, {"dead": 3, "pending": 1})
    seed_forwards(runtime, behind, endpoint, {"pending": 2}, age=timedelta(minutes=11))

    code, figures = status_json(settings)

    assert code == 2
    assert figures["problems"] == [
        "destination ledger (http): 3 forwards dead, never sent: replay them once it takes "
        "them (the console's Destinations page)",
        "destination slow\\u202eone (http): its oldest waiting forward is 660 s old (over 10 "
        "min): it is down, refusing them, or slower than its rate limit",
    ]
    ledger = next(d for d in figures["destinations"] if d["name"] == "ledger")
    assert ledger["last_error"] == error  # --json keeps the text as it is
    result = run_cli(settings, "status", ok=False)
    assert result.exit_code == 2
    line = next(x for x in result.output.splitlines() if x.startswith("  ledger "))
    assert line.startswith("  ledger (http): 1 pending (oldest ")
    assert " s), 3 dead, 0 delivered, 25 failed attempts; last error " in line
    assert line.endswith(": 503 from \\x1b[31mreceiver\\x1b[0m\\nretry later\\u202e")
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "  slow\\u202eone (http): 2 pending (oldest 11.0 min), 0 dead" in result.output
    assert "PROBLEM: destination ledger (http): 3 forwards dead" in result.output


def test_a_long_last_error_is_cut_on_screen_and_kept_whole_in_json(settings, runtime):
    both_alive(runtime)
    seed_destination(runtime, "chatty", last_error="refused: " + "x" * 1000)

    code, figures = status_json(settings)

    assert code == 0 and len(figures["destinations"][0]["last_error"]) == 1009
    line = next(x for x in run_cli(settings, "status").output.splitlines() if "chatty" in x)
    assert line.endswith("refused: " + "x" * 190 + "\N{HORIZONTAL ELLIPSIS}")
