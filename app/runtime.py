"""Everything a process needs, built once at start: web, relay, worker and CLI share it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Engine
from sqlalchemy.orm import sessionmaker

import app.models  # noqa: F401  (every mapper, so relationships resolve in any process)
from app.crypto import SecretBox
from app.db import make_engine, make_session_factory, utcnow
from app.handlers import Router, default_router, import_handler_modules
from app.providers import load_providers
from app.providers.base import Provider
from app.settings import Settings


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    session_factory: sessionmaker
    providers: dict[str, Provider]
    router: Router
    box: SecretBox = field(repr=False)
    clock: Callable[[], datetime] = utcnow
    # Set after an ingest commit; the embedded dispatcher waits on it.
    wake: threading.Event = field(default_factory=threading.Event)

    def wake_dispatcher(self) -> None:
        self.wake.set()

    def provider(self, name: str) -> Provider:
        try:
            return self.providers[name]
        except KeyError:
            installed = ", ".join(sorted(self.providers))
            raise LookupError(
                f"provider {name!r} is not installed (installed: {installed})"
            ) from None


def build_runtime(
    settings: Settings,
    *,
    router: Router | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> Runtime:
    settings = settings.with_embedded_key()
    if settings.database_url is None:
        settings.instance_path.mkdir(parents=True, exist_ok=True)
    if router is None:
        import_handler_modules(settings.handlers)
        router = default_router
    engine = make_engine(settings.sqlalchemy_url)
    return Runtime(
        settings=settings,
        engine=engine,
        session_factory=make_session_factory(engine),
        providers=load_providers(),
        router=router,
        box=SecretBox(settings.secret_keys),
        clock=clock,
    )
