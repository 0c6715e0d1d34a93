"""Logs as an operator reads them: one JSON object a line with HOOKLATCH_LOG_FORMAT=json,
the ids of what is being handled on each; and a start-up that says what started, in
hooklatch's own words, without a library's chatter."""

import json
import subprocess

from alembic.script import ScriptDirectory

from hooklatch.migrations import alembic_config
from tests.support.cli import cli_env
from tests.support.database import fresh_database
from tests.support.pipeline import deliver, make_endpoint, wait_for
from tests.support.processes import (
    chatter,
    hooklatch_cmd,
    listening,
    process_env,
    start_procfile_web,
)


def json_lines(text):
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    return [json.loads(line) for line in lines]  # every line parses


def test_json_logs_carry_the_ids_of_what_is_handled(procs, proc_settings, runtime, client):
    env = process_env(proc_settings, HOOKLATCH_LOG_FORMAT="json")
    worker = procs("worker", hooklatch_cmd("worker"), env)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    endpoint, _ = make_endpoint(runtime)
    event_id = deliver(client, endpoint, "evt_logged", "fail.logged")  # its failure is logged

    def failure_logged():
        return [r for r in json_lines(worker.log()) if r.get("event_id") == event_id]

    wait_for(failure_logged, timeout=30, message="the failed attempt logged")
    record = failure_logged()[0]
    assert record["endpoint_id"] == endpoint
    assert record["external_id"] == "evt_logged"
    assert record["job_id"]
    assert {"timestamp", "level", "logger", "message"} <= record.keys()
    relay.stop()
    assert any(r["message"] == "relay started" for r in json_lines(relay.log()))


def test_web_logs_are_json_too(procs, settings):
    _, _, web = start_procfile_web(procs, settings, HOOKLATCH_LOG_FORMAT="json")
    web.stop()
    records = json_lines(web.log())
    assert any(r["message"].startswith("web listening on") for r in records)


def test_start_up_says_what_started_and_nothing_else(procs, proc_settings, settings):
    env = process_env(proc_settings)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    _, _, web = start_procfile_web(procs, settings)
    wait_for(lambda: listening(worker), timeout=30, message="worker listening")
    wait_for(lambda: "relay started" in relay.log(), timeout=30, message="relay started")
    for proc in (worker, relay, web):
        proc.stop()

    for proc, started in (
        (worker, "worker listening on queue"),
        (relay, "relay started"),
        (web, "web listening on"),
    ):
        text = proc.log()
        assert started in text
        assert not chatter(text), text
        assert "Traceback" not in text


def test_an_unknown_log_format_is_refused_at_start(settings):
    env = {**cli_env(settings), "HOOKLATCH_LOG_FORMAT": "yaml", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        hooklatch_cmd("status"), env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert "HOOKLATCH_LOG_FORMAT must be text or json, got 'yaml'" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_release_step_says_which_revisions_it_applied_and_nothing_else(secret_key):
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    with fresh_database("hooklatch_release") as url:
        env = {"DATABASE_URL": url, "HOOKLATCH_SECRET_KEYS": secret_key, "PATH": "/usr/bin:/bin"}

        def upgrade():
            result = subprocess.run(
                hooklatch_cmd("db", "upgrade"), env=env, capture_output=True, text=True, timeout=60
            )
            assert result.returncode == 0, result.stderr
            return (result.stdout + result.stderr).strip().splitlines()

        assert upgrade() == [f"database at revision {head} (was: none)"]
        assert upgrade() == [f"database at revision {head} (no change)"]
