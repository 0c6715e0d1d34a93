"""hooklatch: a webhook receiver that stores every event once and processes it once."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from flask import Flask

from app.db import utcnow
from app.handlers import Router
from app.settings import Settings


def create_app(
    settings: Settings | None = None,
    *,
    router: Router | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> Flask:
    from app import logs
    from app.admin.views import bp as admin_bp
    from app.errors import register_error_handlers
    from app.events.views import bp as events_bp
    from app.runtime import build_runtime

    settings = settings or Settings.from_env()
    logs.configure()
    runtime = build_runtime(settings, router=router, clock=clock)
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = runtime.settings.max_body_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.extensions["hooklatch"] = runtime
    register_error_handlers(app)
    app.register_blueprint(events_bp)
    app.register_blueprint(admin_bp)
    if runtime.settings.embedded and runtime.settings.start_dispatcher:
        from workers.dispatcher import start_embedded_dispatcher

        start_embedded_dispatcher(runtime)
    return app
