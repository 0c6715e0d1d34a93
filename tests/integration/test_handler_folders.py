"""HOOKLATCH_HANDLERS' modules are found in the folder each process starts from (or the
folders HOOKLATCH_HANDLERS_PATH names), as rq and uvicorn find an application's code: the
processes are started as a deployment starts them (console scripts, gunicorn), from a
project folder of their own. A module that is not found stops each process with one
line; an error inside one still shows its traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from sqlalchemy import select

from hooklatch.events.models import Event
from tests.support.install import ROOT
from tests.support.pipeline import make_endpoint, wait_for
from tests.support.processes import free_port, process_env, wait_http
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"
HANDLERS = """\
import os
from pathlib import Path

from hooklatch import on


@on("stripe", "*")
def note(event, ctx):
    with open(Path(__file__).with_name("handled.txt"), "a") as handled:
        handled.write(f"{event.external_id} {os.getpid()}\\n")
"""
BIN = Path(sys.executable).parent


def script(*args: str) -> list[str]:
    """`hooklatch ARGS` as its console script: it puts nothing of the working directory on
    the import path (unlike `python -m`)."""
    return [str(BIN / "hooklatch"), *args]


def project_env(settings, **extra: str) -> dict[str, str]:
    """A process's environment for ``settings``, with nothing of the checkout on the
    import path."""
    env = process_env(
        settings, **{"HOOKLATCH_HANDLERS": "myhandlers", "WEB_CONCURRENCY": "1", **extra}
    )
    del env["PYTHONPATH"]
    return env


def web_command(port: int) -> list[str]:
    """The Procfile's web line, run from another folder: the checkout's wsgi.py and
    gunicorn.conf.py by their paths (gunicorn itself puts its working directory first)."""
    return [
        str(BIN / "gunicorn"),
        "--pythonpath",
        str(ROOT),
        "wsgi:app",
        "-c",
        str(ROOT / "gunicorn.conf.py"),
        "--bind",
        f"127.0.0.1:{port}",
    ]


# A deployment's two ways to start the web process, neither with --pythonpath: gunicorn puts
# its working directory first on the import path itself.
GUNICORN_FORMS = ["procfile", "installed"]


def gunicorn_command(form: str, project: Path, port: int) -> list[str]:
    """The Procfile's web line, run from a checkout (wsgi.py and gunicorn.conf.py in its
    working directory), or the installed form (the image's CMD, the systemd web unit)."""
    if form == "procfile":
        for name in ("wsgi.py", "gunicorn.conf.py"):
            shutil.copy(ROOT / name, project / name)
        app, config = "wsgi:app", "gunicorn.conf.py"
    else:
        app, config = "hooklatch:create_app()", "python:hooklatch.gunicorn_config"
    return [str(BIN / "gunicorn"), app, "-c", config, "--bind", f"127.0.0.1:{port}"]


def status(runtime, event_id: int) -> str | None:
    with runtime.session_factory() as session:
        return session.scalar(select(Event.status).where(Event.id == event_id))


def deliver_and_wait(runtime, base: str, project: Path, external_id: str) -> None:
    endpoint, _ = make_endpoint(runtime, secrets=[SECRET])
    body = stripe_event(external_id)
    response = requests.post(
        f"{base}/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET), timeout=20
    )
    assert response.status_code == 200, response.text
    event_id = response.json()["events"][0]["id"]
    # "processed", not "ignored": the project's handler ran.
    wait_for(lambda: status(runtime, event_id) == "processed", timeout=60, message="processed")
    assert (project / "handled.txt").read_text().startswith(external_id)


@pytest.fixture
def project(tmp_path):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "myhandlers.py").write_text(HANDLERS)
    return folder


# Modules named like the standard library's and hooklatch's libraries'; the first two
# are imported only once a work horse runs its first job.
SHADOWS = [
    "_strptime",
    "stringprep",
    "logging",
    "email",
    "json",
    "uuid",
    "secrets",
    "html",
    "http",
    "decimal",
    "random",
    "hmac",
    "hashlib",
    "base64",
    "zlib",
    "gzip",
    "typing",
    "dataclasses",
    "ipaddress",
    "socket",
    "select",
    "ssl",
    "signal",
    "traceback",
    "multiprocessing",
    "redis",
    "rq",
    "sqlalchemy",
    "flask",
    "werkzeug",
    "jinja2",
    "psycopg2",
    "prometheus_client",
    "gevent",
    "click",
    "cryptography",
    "hooklatch",
]


def shadow(folder: Path) -> None:
    """With the project's folder on the import path, neither hooklatch's own imports nor
    its libraries' find the project's modules of the same names."""
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise SystemExit('the project\\'s {name}.py')\n")


@pytest.mark.slow
def test_gunicorn_relay_and_worker_started_in_the_project_folder_run_its_handlers(
    procs, proc_settings, runtime, project
):
    env = project_env(proc_settings)
    port = free_port()
    web = procs("web", web_command(port), env, cwd=project)
    procs("relay", script("relay"), env, cwd=project)
    worker = procs("worker", script("worker"), env, cwd=project)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", web)
    deliver_and_wait(runtime, base, project, "evt_project_folder")
    pid = int((project / "handled.txt").read_text().split()[1])
    assert pid != worker.popen.pid  # in a work horse, forked from the worker


@pytest.mark.slow
def test_hooklatch_serve_relay_and_worker_read_handlers_from_the_path_setting(
    procs, proc_settings, runtime, project, tmp_path
):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shadow(project)
    env = project_env(proc_settings, HOOKLATCH_HANDLERS_PATH=f"/nonexistent{os.pathsep}../project")
    port = free_port()
    web = procs("web", script("serve", "--port", str(port)), env, cwd=elsewhere)
    procs("relay", script("relay"), env, cwd=elsewhere)
    procs("worker", script("worker"), env, cwd=elsewhere)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", web)
    deliver_and_wait(runtime, base, project, "evt_path_setting")


@pytest.mark.slow
@pytest.mark.parametrize("form", GUNICORN_FORMS)
def test_gunicorn_never_imports_the_project_modules_named_like_libraries(
    procs, proc_settings, runtime, project, form
):
    """gunicorn puts its working directory first on the import path (to import wsgi.py):
    the web process still finds the libraries before the project's modules."""
    shadow(project)
    if form == "installed":
        # gunicorn itself imports the settings module hooklatch.gunicorn_config, before
        # any of hooklatch's code runs: a project module named hooklatch hides it.
        (project / "hooklatch.py").unlink()
    env = project_env(proc_settings)
    port = free_port()
    web = procs("web", gunicorn_command(form, project, port), env, cwd=project)
    procs("relay", script("relay"), env, cwd=project)
    procs("worker", script("worker"), env, cwd=project)
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", web)
    deliver_and_wait(runtime, base, project, f"evt_gunicorn_{form}")


def run_until_exit(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, float]:
    """Run a process that should stop by itself; its exit code, output, and seconds."""
    started = time.monotonic()
    done = subprocess.run(
        args, env=env, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def commands(port: int) -> dict[str, list[str]]:
    return {
        "web": web_command(port),
        "serve": script("serve", "--port", str(port)),
        "worker": script("worker"),
        "relay": script("relay"),
        "cli": script("providers"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["web", "serve", "worker", "relay", "cli"])
def test_a_handler_module_not_found_stops_the_process_with_one_line(proc_settings, project, kind):
    env = project_env(proc_settings, HOOKLATCH_HANDLERS="myhandlerz")
    code, output, _ = run_until_exit(commands(free_port())[kind], env, project)
    assert code != 0, output
    line = (
        f"HOOKLATCH_HANDLERS: module 'myhandlerz' not found in {project} "
        "(HOOKLATCH_HANDLERS_PATH) or in the installed packages"
    )
    assert output.count(line) == 1, output  # once: gunicorn does not start workers again
    assert "Traceback" not in output, output


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["web", "worker", "cli"])
def test_an_error_inside_a_handler_module_shows_its_traceback(proc_settings, project, kind):
    (project / "myhandlers.py").write_text(HANDLERS + "\nrate = 1 / 0\n")
    env = project_env(proc_settings)
    code, output, _ = run_until_exit(commands(free_port())[kind], env, project)
    assert code != 0, output
    assert "Traceback" in output, output
    assert f'File "{project / "myhandlers.py"}", line ' in output, output
    assert "ZeroDivisionError: division by zero" in output, output


def test_a_project_module_hidden_by_an_installed_one_of_its_name_stops_the_process(
    proc_settings, project
):
    """A project's redis.py is not what `import redis` finds: its handlers would never
    register, so the process stops, naming both."""
    (project / "redis.py").write_text(HANDLERS)
    env = project_env(proc_settings, HOOKLATCH_HANDLERS="redis")
    code, output, _ = run_until_exit(script("providers"), env, project)
    assert code == 1, output
    installed = Path(str(__import__("redis").__file__))
    assert f"module 'redis' is {installed}, not {project / 'redis.py'}" in output, output
    assert output.count("\n") == 1 and "rename yours" in output, output


@pytest.mark.slow
@pytest.mark.parametrize("form", GUNICORN_FORMS)
def test_under_gunicorn_a_project_module_hidden_by_an_installed_one_stops_the_web(
    proc_settings, project, form
):
    (project / "stripe.py").write_text(HANDLERS)
    env = project_env(proc_settings, HOOKLATCH_HANDLERS="stripe")
    code, output, _ = run_until_exit(gunicorn_command(form, project, free_port()), env, project)
    assert code != 0, output
    installed = Path(str(__import__("stripe").__file__))
    line = f"module 'stripe' is {installed}, not {project / 'stripe.py'}"
    assert output.count(line) == 1, output
    assert "Traceback" not in output, output


@pytest.mark.slow
@pytest.mark.parametrize("form", GUNICORN_FORMS)
@pytest.mark.parametrize("path", ["", "elsewhere"])
def test_under_gunicorn_the_path_setting_alone_says_where_handler_modules_are(
    proc_settings, project, tmp_path, form, path
):
    """Set empty or to another folder, HOOKLATCH_HANDLERS_PATH leaves out the working
    directory gunicorn started in, as it does for every other process."""
    (tmp_path / "elsewhere").mkdir()
    env = project_env(proc_settings, HOOKLATCH_HANDLERS_PATH=path and str(tmp_path / path))
    code, output, _ = run_until_exit(gunicorn_command(form, project, free_port()), env, project)
    assert code != 0, output
    where = (
        "in the installed packages (HOOKLATCH_HANDLERS_PATH is empty)"
        if path == ""
        else f"in {tmp_path / path} (HOOKLATCH_HANDLERS_PATH) or in the installed packages"
    )
    assert output.count(f"HOOKLATCH_HANDLERS: module 'myhandlers' not found {where}") == 1, output
    assert "Traceback" not in output, output


def test_the_cli_and_the_worker_do_not_import_gunicorn():
    """Only the web process needs gunicorn: `hooklatch --version`, the worker's and the
    relay's modules and the handler lookup import nothing of it."""
    code = (
        "import sys\n"
        "import hooklatch.cli, hooklatch.handler_modules, hooklatch.runtime\n"
        "import hooklatch.workers.worker.main, hooklatch.workers.relay.main\n"
        "sys.argv = ['hooklatch', '--version']\n"
        "try:\n"
        "    hooklatch.cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(name for name in sys.modules if name.partition('.')[0] == 'gunicorn'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr


def test_an_empty_path_setting_looks_only_in_the_installed_packages(proc_settings, project):
    env = project_env(proc_settings, HOOKLATCH_HANDLERS_PATH="")
    code, output, _ = run_until_exit(script("providers"), env, project)
    assert code == 1, output
    assert output.strip() == (
        "Error: HOOKLATCH_HANDLERS: module 'myhandlers' not found in the installed packages "
        "(HOOKLATCH_HANDLERS_PATH is empty)"
    )
