"""Building the runtime a process runs on: settings checked, handler modules imported,
providers loaded, engines made. The web app, the CLI (and so relay and worker) and the
embedded server call ``build_runtime`` once at start."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import event
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.pool import ConnectionPoolEntry

import hooklatch.models  # noqa: F401  (every mapper, so relationships resolve in any process)
from hooklatch.crypto import SecretBox
from hooklatch.db import is_postgres, make_engine, make_session_factory, utcnow
from hooklatch.endpoints.service import EndpointCache
from hooklatch.handler_modules import import_handler_modules
from hooklatch.handlers import Router, default_router
from hooklatch.ingest.statements import prepare_ingest_statements
from hooklatch.providers.loading import load_providers
from hooklatch.runtime import Runtime
from hooklatch.settings import Settings, check_retention


def _prepare_ingest_statements(
    dbapi_connection: DBAPIConnection, record: ConnectionPoolEntry
) -> None:
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
