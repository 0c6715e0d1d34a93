"""The embedded default: no PostgreSQL, no Redis, one command, a processed demo event."""

import os
import re
import subprocess
import sys
import time

import pytest

from tests.support.install import ROOT
from tests.support.processes import chatter, free_port

COMMAND = re.compile(r"^\s+(\S*hooklatch send-test demo.*)$", re.MULTILINE)


def bare_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("HOOKLATCH_", "DATABASE_", "REDIS_"))
    }
    env.update(extra)
    return env


def wait_for_send_command(proc, log_path, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        match = COMMAND.search(log_path.read_text(errors="replace"))
        if match:
            return match.group(1)
        if proc.popen.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"no send-test command printed:\n{log_path.read_text(errors='replace')}")


def send_and_check(command, cwd, env):
    # The printed command is meant to be pasted into a shell in the same folder.
    result = subprocess.run(  # noqa: S602
        command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"status": "accepted"' in result.stdout
    assert re.search(r"event \d+: processed", result.stdout), result.stdout


@pytest.mark.slow
def test_serve_on_a_bare_machine_processes_the_demo_event(procs, tmp_path):
    port = free_port()
    env = bare_env(PYTHONPATH=str(ROOT))
    proc = procs(
        "serve",
        [sys.executable, "-m", "hooklatch", "serve", "--port", str(port)],
        env,
        cwd=tmp_path,
    )
    command = wait_for_send_command(proc, proc.log_path)
    command = (
        command.replace("hooklatch", f"{sys.executable} -m hooklatch", 1)
        if command.startswith("hooklatch")
        else command
    )
    send_and_check(command, tmp_path, env)
    assert (tmp_path / "instance" / "hooklatch.sqlite3").exists()
    assert "demo handler ran for stripe invoice.paid" in proc.log()
    # Start-up says where it listens in hooklatch's words, without gunicorn's or Alembic's.
    assert "web listening on 127.0.0.1:" in proc.log()
    assert not chatter(proc.log()), proc.log()


def test_readme_first_screen_gives_the_run_and_test_commands():
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:30])
    assert "make run" in first_screen
    assert "make test" in first_screen


def test_readme_fits_on_two_screens_and_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    # The rest is in docs/: each page the README sends a reader to is there.
    linked = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert "docs/index.md" in linked
    assert [page for page in linked if not (ROOT / page).is_file()] == []


@pytest.mark.slow
def test_readme_run_command_works_from_a_fresh_clone(procs, tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    port = free_port()
    env = bare_env(PYTHON=sys.executable)
    # `make run` as the README says; the port is moved only to keep parallel runs apart.
    proc = procs("make-run", ["make", "run", f"HOOKLATCH_SERVE_ARGS=--port {port}"], env, cwd=clone)
    command = wait_for_send_command(proc, proc.log_path, timeout=300)
    send_and_check(command, clone, env)
