"""hooklatch: a webhook receiver that stores every event once and processes it once.

What users import: handlers are registered with ``on`` and receive an ``EventView`` and
a ``Context``::

    from hooklatch import Context, EventView, on

    @on("stripe", "invoice.paid")
    def record_invoice(event: EventView, ctx: Context) -> None:
        ...

Provider plugins import from ``hooklatch.providers``, their tests from
``hooklatch.testing``. Everything else is internal and may move.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from hooklatch.handlers import Context, EventView, Router, on
    from hooklatch.settings import Settings

__all__ = ["Context", "EventView", "Router", "Settings", "create_app", "on"]

# Imported when first asked for: importing hooklatch itself imports nothing but the
# standard library, so gunicorn can load its settings module, hooklatch.gunicorn_config,
# before anything else of the web process's is imported (see that module).
_LAZY = {
    "Context": "hooklatch.handlers",
    "EventView": "hooklatch.handlers",
    "Router": "hooklatch.handlers",
    "on": "hooklatch.handlers",
    "Settings": "hooklatch.settings",
}


if not TYPE_CHECKING:  # type checkers see the imports above, and no other name

    def __getattr__(name: str) -> object:
        if name not in _LAZY:
            raise AttributeError(f"module 'hooklatch' has no attribute {name!r}")
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def create_app(
    settings: Settings | None = None,
    *,
    router: Router | None = None,
    clock: Callable[[], datetime] | None = None,
) -> Flask:
    from flask import Flask

    from hooklatch import logs
    from hooklatch.admin import console, init_api
    from hooklatch.assembly import build_runtime
    from hooklatch.db import utcnow
    from hooklatch.errors import refuse_nul, register_error_handlers
    from hooklatch.health import bp as health_bp
    from hooklatch.ingest.views import IngestRoute
    from hooklatch.operations import scrape
    from hooklatch.settings import Settings

    settings = settings or Settings.from_env()
    logs.configure()
    runtime = build_runtime(settings, router=router, clock=clock or utcnow)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = runtime.settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["hooklatch"] = runtime
    register_error_handlers(app)
    refuse_nul(app)
    app.register_blueprint(health_bp)
    init_api(app)
    console.init_app(app)
    scrape.init_app(app, runtime)
    app.wsgi_app = IngestRoute(app.wsgi_app, runtime)  # type: ignore[method-assign]
    if runtime.settings.embedded and runtime.settings.start_dispatcher:
        from hooklatch.embedded.dispatcher import start_embedded_dispatcher

        start_embedded_dispatcher(runtime)
    return app
