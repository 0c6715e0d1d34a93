"""`hooklatch status`: the numbers of a known set of events, and heartbeats of real
relay, worker and embedded web processes: alive while they run, silent when killed, gone
when stopped; one line and exit 1 when the database cannot be read."""

import json
import signal
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from hooklatch.assembly import build_runtime
from hooklatch.operations.backlog import read_backlog
from hooklatch.operations.models import Heartbeat
from tests.support.cli import run_cli
from tests.support.database import count
from tests.support.pipeline import deliver, drain, make_endpoint, wait_for
from tests.support.processes import free_port, hooklatch_cmd, process_env, start_procfile_web


def status_json(settings):
    result = run_cli(settings, "status", "--json", ok=False)
    assert result.exit_code in (0, 2), result.output
    return result.exit_code, json.loads(result.output)


def test_status_counts_pending_due_dead_outbox_and_refusals(settings, runtime, client):
    endpoint, _ = make_endpoint(runtime)
    for n in range(2):
        deliver(client, endpoint, f"evt_done_{n}")
    drain(runtime)
    dead, due, waiting = (deliver(client, endpoint, f"evt_{name}") for name in "abc")
    now = datetime.now(UTC)
    with runtime.engine.begin() as c:
        c.execute(text("UPDATE events SET status = 'dead' WHERE id = :i"), {"i": dead})
        c.execute(
            text("UPDATE events SET next_attempt_at = :t WHERE id = :i"),
            {"t": now - timedelta(minutes=1), "i": due},
        )
        c.execute(
            text("UPDATE events SET next_attempt_at = :t WHERE id = :i"),
            {"t": now + timedelta(hours=1), "i": waiting},
        )
        c.execute(text("DELETE FROM outbox WHERE event_id IN (:a, :b)"), {"a": dead, "b": due})
        c.execute(
            text(
                "INSERT INTO refusals (endpoint_id, reason, count, first_at, last_at) VALUES "
                "(:e, 'bad_signature', 7, :old, :now), (:e, 'stale_timestamp', 2, :old, :old)"
            ),
            {"e": endpoint, "now": now, "old": now - timedelta(hours=2)},
        )
        for kind, beat in (("relay", now), ("worker", now - timedelta(minutes=1))):
            c.execute(
                text(
                    "INSERT INTO heartbeats (id, kind, hostname, pid, started_at, beat_at) "
                    "VALUES (:i, :k, 'host-a', 42, :b, :b)"
                ),
                {"i": f"{kind}/host-a/42", "k": kind, "b": beat},
            )

    code, figures = status_json(settings)

    assert figures["events"]["pending"] == 2
    assert figures["events"]["retries_due"] == 1
    assert figures["events"]["dead"] == 1
    assert figures["outbox"]["waiting"] == 1
    assert figures["refusals_last_hour"] == [
        {"reason": "bad_signature", "count": 7, "endpoints": 1}
    ]
    assert {p["kind"]: p["alive"] for p in figures["processes"]} == {
        "relay": True,
        "worker": False,
    }
    assert (code, figures["problems"]) == (2, ["no worker alive"])
    screen = run_cli(settings, "status", ok=False).output
    assert "2 pending" in screen and "1 retries due" in screen and "1 dead" in screen
    assert "SILENT" in screen and "PROBLEM: no worker alive" in screen


def test_heartbeats_of_real_processes(procs, proc_settings, settings, runtime):
    env = process_env(
        proc_settings, HOOKLATCH_HEARTBEAT_SECONDS="0.3", HOOKLATCH_CLEANUP_INTERVAL_SECONDS="0.2"
    )
    relay = procs("relay", hooklatch_cmd("relay"), env)
    worker = procs("worker", hooklatch_cmd("worker"), env)

    def alive():
        return status_json(settings)[1]["alive"]

    wait_for(lambda: alive() == {"relay": 1, "worker": 1}, timeout=30, message="both beating")
    code, figures = status_json(settings)
    assert code == 0 and figures["problems"] == []
    wait_for(lambda: status_json(settings)[1]["cleanup"], timeout=30, message="a cleanup pass")

    worker.kill(signal.SIGKILL)
    wait_for(lambda: alive()["worker"] == 0, timeout=10, message="the killed worker silent")
    assert count(runtime, "SELECT count(*) FROM heartbeats WHERE kind = 'worker'") == 1
    assert status_json(settings)[0] == 2

    relay.stop()  # SIGTERM: a clean stop takes its row away
    assert count(runtime, "SELECT count(*) FROM heartbeats WHERE kind = 'relay'") == 0


def test_embedded_web_processes_beat_for_their_dispatchers(procs, settings, runtime):
    embedded = replace(settings, redis_url=None)
    _, _, web = start_procfile_web(
        procs,
        embedded,
        WEB_CONCURRENCY="2",
        HOOKLATCH_HEARTBEAT_SECONDS="0.3",
        HOOKLATCH_CLEANUP_INTERVAL_SECONDS="0.2",
    )

    def figures():
        return status_json(embedded)[1]

    wait_for(lambda: figures()["alive"] == {"dispatcher": 2}, timeout=30, message="two beating")
    wait_for(lambda: figures()["cleanup"], timeout=30, message="a dispatcher's cleanup pass")
    assert status_json(embedded)[0] == 0

    web.stop()  # SIGTERM: each worker's exit takes its dispatcher's row away
    assert count(runtime, "SELECT count(*) FROM heartbeats") == 0, web.log()


def test_status_says_in_one_line_that_the_database_cannot_be_read(settings):
    away = replace(settings, database_url=f"postgresql://postgres@127.0.0.1:{free_port()}/x")

    result = run_cli(away, "status", ok=False)

    assert result.exit_code == 1
    assert result.output.startswith("Error: the database cannot be read: OperationalError")
    assert len(result.output.strip().splitlines()) == 1


def test_status_and_metrics_agree_on_who_is_alive_by_each_process_own_interval(settings, runtime):
    """A process counts silent after three of its own beat intervals (kept in its row),
    in `hooklatch status` and in the hooklatch_processes_alive gauge alike."""
    now = datetime.now(UTC)
    with runtime.session_factory.begin() as session:
        for kind, pid, every in (("relay", 1, 60.0), ("worker", 2, 5.0)):
            session.add(
                Heartbeat(
                    id=f"{kind}/host/{pid}",
                    kind=kind,
                    hostname="host",
                    pid=pid,
                    started_at=now - timedelta(minutes=5),
                    beat_at=now - timedelta(seconds=30),
                    state={"every": every},
                )
            )
    assert status_json(settings)[1]["alive"] == {"relay": 1, "worker": 0}
    assert read_backlog(runtime).alive == {"relay": 1, "worker": 0}
    # The embedded default keeps neither alive, only its web processes' dispatchers.
    embedded = build_runtime(replace(settings, redis_url=None, start_dispatcher=False))
    try:
        assert read_backlog(embedded).alive == {"dispatcher": 0}
    finally:
        embedded.dispose()
