"""gunicorn.conf.py, the Procfile web process's settings, loaded as gunicorn loads it."""

import gc
import logging
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hooklatch import handler_modules

CONF = Path(__file__).resolve().parents[2] / "gunicorn.conf.py"


@pytest.fixture
def conf(monkeypatch):
    """The file's namespace. Loading it makes a metrics directory and names it in the
    environment, as gunicorn's master does for its workers: undone afterwards, or every
    later test in this process would count into files."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # recorded, so undone at the end
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    # It moves gunicorn's working directory on the import path (and hooklatch's handler
    # lookup would take it off later): this process's own path is put back afterwards.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(handler_modules, "_server_entries", [])
    return runpy.run_path(str(CONF))


def test_a_worker_freezes_what_it_loaded_so_that_full_collections_skip_it(conf):
    """A full collection in a web worker used to walk every object the app loaded (about
    100,000) and stall the worker's requests for tens of milliseconds under load."""
    gc.unfreeze()
    try:
        conf["post_worker_init"](object())
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()


class Log:
    def __init__(self):
        self.lines = []

    def info(self, message, *args):
        self.lines.append(("info", message % args))

    def warning(self, message, *args):
        self.lines.append(("warning", message % args))


def server(http_parser):
    return SimpleNamespace(cfg=SimpleNamespace(http_parser=http_parser), log=Log())


def test_the_installed_web_process_parses_http_in_c(conf, caplog):
    """The lock files install gunicorn_h1c: under a flood of refusals, gunicorn's Python
    parser cost enough CPU to double the good deliveries' p99 (docs/benchmarks.md)."""
    caplog.set_level(logging.INFO)
    ready = server("auto")
    conf["when_ready"](ready)
    assert ready.log.lines == []  # gunicorn's own log says nothing at start
    [line] = [r.getMessage() for r in caplog.records if r.name == "hooklatch.web"]
    assert line.startswith("web listening on ")
    assert line.endswith("workers, HTTP parser: gunicorn_h1c (C)")


def test_an_operator_is_told_when_requests_are_parsed_in_python(conf):
    ready = server("python")
    conf["when_ready"](ready)
    [(level, line)] = ready.log.lines
    assert level == "warning"
    assert "Python parser (http_parser=python;" in line
    assert "hooklatch[fast]" in line


def test_a_kept_alive_connection_is_closed_with_its_fiftieth_answer(conf):
    requests = [SimpleNamespace(req_number=n, must_close=False) for n in (1, 49, 50, 51)]
    for request in requests:
        conf["pre_request"](object(), request)
    assert [request.must_close for request in requests] == [False, False, True, True]


def test_outside_gevent_a_request_gives_no_turn(conf):
    """Sync and threaded workers have no hub to yield to: post_request does nothing."""
    gc.unfreeze()
    try:
        conf["post_worker_init"](object())
    finally:
        gc.unfreeze()
    # The hooks' own globals: run_path returns a copy of the module's.
    assert conf["post_request"].__globals__["_take_turns"] is None
    conf["post_request"](object(), SimpleNamespace(), {}, SimpleNamespace())
