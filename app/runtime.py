"""Everything a process needs, built once at start: web, relay, worker and CLI share it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.orm import sessionmaker

import hooklatch.models  # noqa: F401  (every mapper, so relationships resolve in any process)
from hooklatch.crypto import SecretBox
from hooklatch.db import is_postgres, make_engine, make_session_factory, utcnow
from hooklatch.endpoints.service import EndpointCache
from hooklatch.handler_modules import import_handler_modules
from hooklatch.handlers import Router, default_router
from hooklatch.ingest.refusals import RefusalCounter
from hooklatch.ingest.statements import prepare_ingest_statements
from hooklatch.operations.activity import ActivityCounter
from hooklatch.providers.base import Provider
from hooklatch.providers.loading import load_providers
from hooklatch.settings import Settings, check_retention


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
    # PostgreSQL only: a pool of autocommit connections for the ingest path, and the
    # endpoints it has verified lately (see EndpointCache).
    ingest_engine: Engine | None = None
    endpoints: EndpointCache | None = None
    # Refused deliveries by endpoint and reason, written in batches (app/ingest/refusals.py).
    refusals: RefusalCounter = field(init=False, repr=False)
    # Deliveries by endpoint, hour and outcome, written in batches (operations/activity.py).
    activity: ActivityCounter = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.refusals = RefusalCounter(
            self.ingest_connection, interval=self.settings.refusal_flush_seconds
        )
        # In one transaction each time: a flush that fails part-way writes nothing, and
        # is tried again whole (on the autocommit ingest connections, what it had written
        # would be counted twice).
        self.activity = ActivityCounter(
            self.engine.begin, interval=self.settings.refusal_flush_seconds
        )

    @contextmanager
    def ingest_connection(self) -> Iterator[Connection]:
        """A connection for one ingest. On PostgreSQL it autocommits: every statement the
        ingest runs is atomic by itself, which saves the BEGIN and COMMIT round trips.
        Elsewhere it is a transaction, committed at the end."""
        if self.ingest_engine is not None:
            with self.ingest_engine.connect() as c:
                yield c
        else:
            with self.engine.begin() as c:
                yield c

    def dispose(self) -> None:
        self.refusals.close()
        self.activity.close()
        self.engine.dispose()
        if self.ingest_engine is not None:
            self.ingest_engine.dispose()

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


def current_runtime() -> Runtime:
    """The runtime of the Flask app serving this request."""
    from flask import current_app

    runtime: Runtime = current_app.extensions["hooklatch"]
    return runtime


def _prepare_ingest_statements(dbapi_connection: Any, record: Any) -> None:
    prepare_ingest_statements(dbapi_connection, record.info)


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
        import_handler_modules(settings.handlers, settings.handlers_path)
        router = default_router
    providers = load_providers()
    check_retention(settings, providers)
    engine = make_engine(settings.sqlalchemy_url)
    ingest_engine = None
    if is_postgres(engine):
        # Pooled connections are not pinged here: the ingest path replaces a dead one
        # itself, and a ping would double its round trips (see events.views).
        # A fixed set of them and no overflow (settings.ingest_connections).
        ingest_engine = make_engine(
            settings.sqlalchemy_url,
            isolation_level="AUTOCOMMIT",
            pool_pre_ping=False,
            pool_size=settings.ingest_connections,
            max_overflow=0,
            pool_timeout=settings.ingest_wait_seconds,
        )
        if settings.prepare_statements:
            event.listen(ingest_engine, "connect", _prepare_ingest_statements)
    return Runtime(
        settings=settings,
        engine=engine,
        session_factory=make_session_factory(engine),
        providers=providers,
        router=router,
        box=SecretBox(settings.secret_keys),
        clock=clock,
        ingest_engine=ingest_engine,
        endpoints=EndpointCache() if ingest_engine is not None else None,
    )
