"""The container image's commands, run here as the image runs them: the web process as
an installed package starts it (no wsgi.py, no gunicorn.conf.py beside it) and the health
check's one line of Python. tests/deploy runs them inside the image itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.dockerfile import stages
from tests.support.processes import free_port, process_env, wait_http


def _run_check(command: list[str], port: int) -> int:
    python, *rest = command
    assert python == "python3"
    env = {"PORT": str(port), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, *rest], env=env, timeout=30, capture_output=True)
    return done.returncode


@pytest.mark.slow
def test_the_default_command_serves_and_the_health_check_sees_it(procs, proc_settings, tmp_path):
    runtime = stages()[1][-1]
    program, *args = runtime.last("CMD").exec_form()
    check = runtime.last("HEALTHCHECK").exec_form()
    port = free_port()
    env = process_env(proc_settings, HOST="127.0.0.1", PORT=str(port), WEB_CONCURRENCY="1")
    web = procs("web", [str(Path(sys.executable).parent / program), *args], env, cwd=tmp_path)
    wait_http(f"http://127.0.0.1:{port}/livez", web)
    assert "gevent workers" in web.log()

    assert _run_check(check, port) == 0
    web.stop()
    assert _run_check(check, port) != 0
