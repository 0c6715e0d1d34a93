"""gunicorn settings of the web process: the Procfile's (`gunicorn wsgi:app -c
gunicorn.conf.py`, which reads them from here) and `hooklatch serve`'s."""

import gc
import importlib.util
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from gunicorn import util
from gunicorn.errors import AppImportError

from hooklatch.handler_modules import HandlerModuleNotFound, put_server_directory_last

# gunicorn has put the folder it runs in first on the import path, to import wsgi.py from
# it: moved last, where a project's modules named like the standard library's or the
# installed packages' (json.py, redis.py, stripe.py) hide none of them, as in every other
# process (hooklatch.handler_modules). Done before anything is imported that gunicorn has
# not imported already (all of the above has been) and before the app is loaded. On a
# reload (SIGHUP) gunicorn finds its directory on the path already, and leaves it.
put_server_directory_last(util.getcwd())

from gunicorn import glogging  # noqa: E402  (imports json, first: after the line above)

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"  # noqa: S104
if os.environ.get("DATABASE_URL"):
    workers = int(os.environ.get("WEB_CONCURRENCY", (os.cpu_count() or 1) * 2))
    # A client sending its body slowly holds a greenlet, not the worker: with sync workers,
    # as many slow clients as workers stopped the service. See post_worker_init.
    default_worker_class = "gevent"
else:
    # The embedded default keeps its dispatcher in the one web process, beside threads
    # that let a client too slow to send its request go (hooklatch.embedded.worker).
    workers = 1
    default_worker_class = "hooklatch.embedded.worker.PacedThreadWorker"
worker_class = os.environ.get("GUNICORN_WORKER_CLASS") or default_worker_class
threads = int(os.environ.get("GUNICORN_THREADS") or (4 if workers == 1 else 1))
# Providers give up after a few seconds (Slack 3 s, GitHub 10 s): never hold a request longer.
timeout = int(os.environ.get("GUNICORN_TIMEOUT", 30))
graceful_timeout = 20
keepalive = 5
accesslog = os.environ.get("GUNICORN_ACCESS_LOG") or None
# gunicorn's start-up and shutdown lines ("Booting worker", "Using worker") are INFO: a
# start says one line of hooklatch's own instead (when_ready). Warnings and errors show.
loglevel = os.environ.get("GUNICORN_LOG_LEVEL", "warning")


class _Logger(glogging.Logger):
    """gunicorn's error and access logs in hooklatch's format (HOOKLATCH_LOG_FORMAT)."""

    def setup(self, cfg):
        super().setup(cfg)
        from hooklatch import logs

        for handler in (*self.error_log.handlers, *self.access_log.handlers):
            handler.setFormatter(logs.formatter())


logger_class = _Logger
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

# /metrics adds up every worker's counts, which each worker keeps in files of this
# directory (prometheus_client's multiprocess mode, hooklatch.metrics): made here, before
# any worker starts, unless it is given. See on_starting and child_exit.
_METRICS_DIR = "PROMETHEUS_MULTIPROC_DIR"
_METRICS_DIR_MADE = "HOOKLATCH_METRICS_DIR_MADE"  # survives a reload (SIGHUP) of this file
if not os.environ.get(_METRICS_DIR):
    os.environ[_METRICS_DIR] = tempfile.mkdtemp(prefix="hooklatch-metrics-")
    os.environ[_METRICS_DIR_MADE] = os.environ[_METRICS_DIR]

# A kept-alive connection stays with the worker that accepted it. Clients that connect at
# the same moment land unevenly (16 connections opened at once spread 9, 4, 2 and 1 over
# four gevent workers: 779 requests a second, where 6, 6, 3 and 1 gave 1,086), and a busy
# worker is the slowest to accept, so closing each connection after this many requests
# (as nginx's keepalive_requests and Apache's MaxKeepAliveRequests do) moves the load to
# the idler workers. A new connection costs a gevent worker about 0.5 ms of CPU, so this
# adds about 0.01 ms per request (docs/benchmarks.md).
_KEEPALIVE_REQUESTS = 50
# Under gevent: how a request's greenlet gives the others of its worker a turn (see
# post_request).
_take_turns = None


def post_fork(server, worker):
    """In each worker, before it loads the app. A --chdir folder, which gunicorn put first
    on the import path after reading this module, goes last too (--pythonpath's folders
    stay first: the user's choice).

    A handler module that is not found stops the server with its one line: gunicorn does
    that for an AppImportError raised while a worker loads the app (rather than printing
    a traceback, and starting workers again and again)."""
    put_server_directory_last(server.cfg.chdir, named=(server.cfg.pythonpath or "").split(","))
    load = worker.load_wsgi

    def load_wsgi():
        try:
            load()
        except HandlerModuleNotFound as exc:
            raise AppImportError(str(exc)) from None

    worker.load_wsgi = load_wsgi


def post_worker_init(worker):
    """Under gevent (the worker has monkey-patched before this runs), psycopg2 waits for
    PostgreSQL through gevent's hub, so a request waiting on the database lets the
    worker's other requests run.

    What the worker has loaded by now (the app, its libraries: about 100,000 objects)
    lives as long as the worker; frozen, a full garbage collection does not walk it.
    Unfrozen, each full collection stalled every request of the worker for 40-80 ms
    under a flood of refusals (docs/benchmarks.md)."""
    gc.freeze()
    monkey = sys.modules.get("gevent.monkey")
    if monkey is not None and monkey.is_module_patched("socket"):
        import gevent
        from psycogreen.gevent import patch_psycopg

        patch_psycopg()
        global _take_turns
        _take_turns = gevent.sleep


def pre_request(worker, req):
    """The answer to a connection's ``_KEEPALIVE_REQUESTS``-th request closes it."""
    if req.req_number >= _KEEPALIVE_REQUESTS:
        req.must_close = True


def post_request(worker, req, environ, resp):
    """Under gevent, a worker's greenlets take turns only where one has to wait. A
    kept-alive connection whose next request is already there (sent at once after each
    answer, or pipelined) never waits, so its greenlet was served again and again while
    every other connection of the worker, and new ones, waited: one worker answering
    refusals to 20 such connections gave a p50 of 0.3 ms and a p99 of 0.5 to 0.8 s (20
    connections sharing it evenly wait about 6 ms each). After each request the greenlet
    yields to gevent's hub (measured: p50 6.4 ms, p99 9.5 ms in that case)."""
    if _take_turns is not None:
        _take_turns(0)


def when_ready(server):
    """One line: where the web process listens, with how many workers of which class and
    which HTTP parser. gunicorn parses with gunicorn_h1c (C) when it is installed
    (requirements/fast.txt; hooklatch's `fast` extra), else in Python, which cost about
    0.1 ms of CPU more per request: under a flood of refusals, a large part of what a
    refusal costs (docs/benchmarks.md); that is a warning."""
    from gunicorn.http import message

    from hooklatch import logs

    logs.configure()

    try:
        # gunicorn's own decision (it also falls back when the module does not load, is
        # too old, or a setting needs the Python parser).
        fast = message._check_fast_parser(server.cfg)
    except Exception as exc:  # a log line must not stop the server
        fast, why = False, str(exc)
    else:
        why = f"http_parser={server.cfg.http_parser}"
    cfg = server.cfg  # what the command line and this file settled on
    logging.getLogger("hooklatch.web").info(
        "web listening on %s: %d %s workers, HTTP parser: %s",
        ", ".join(getattr(cfg, "bind", None) or [bind]),
        getattr(cfg, "workers", workers),
        str(getattr(cfg, "worker_class_str", worker_class)).rsplit(".", 1)[-1],
        "gunicorn_h1c (C)" if fast else "Python",
    )
    if not fast:
        server.log.warning(
            "HTTP parser: gunicorn's Python parser (%s; gunicorn_h1c %s); install "
            "requirements/fast.txt or hooklatch[fast] for the C parser",
            why,
            "found" if importlib.util.find_spec("gunicorn_h1c") else "not installed",
        )


def on_starting(server):
    """Counts start from zero with the server: files left in a given directory by an
    earlier run would be added to this one's (a reload keeps them: it runs only once)."""
    for stale in Path(os.environ[_METRICS_DIR]).glob("*.db"):
        stale.unlink(missing_ok=True)


def child_exit(server, worker):
    """A worker gone (recycled, killed): its counters stay in the sum, its live gauges go."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


def on_exit(server):
    made = os.environ.get(_METRICS_DIR_MADE)
    if made and made == os.environ.get(_METRICS_DIR):
        shutil.rmtree(made, ignore_errors=True)
