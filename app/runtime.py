"""Everything a process needs, built once at start (hooklatch.assembly.build_runtime):
web, relay, worker and CLI share it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Connection, Engine
from sqlalchemy.orm import sessionmaker

from hooklatch.crypto import SecretBox
from hooklatch.db import utcnow
from hooklatch.endpoints.refusals import RefusalCounter
from hooklatch.endpoints.service import EndpointCache
from hooklatch.events.activity import ActivityCounter
from hooklatch.handlers import Router
from hooklatch.providers.base import Provider
from hooklatch.reconcile.runs import Reconciler, ReconcileSettings
from hooklatch.settings import Settings


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
    # Refused deliveries by endpoint and reason, written in batches (app/endpoints/refusals.py).
    refusals: RefusalCounter = field(init=False, repr=False)
    # Deliveries by endpoint, hour and outcome, written in batches (app/events/activity.py).
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


def reconciler(runtime: Runtime) -> Reconciler:
    """Reconcile runs with this runtime's database, keys, providers and settings."""
    settings = runtime.settings
    return Reconciler(
        session_factory=runtime.session_factory,
        box=runtime.box,
        provider=runtime.provider,
        settings=ReconcileSettings(
            overlap=timedelta(seconds=settings.reconcile_overlap_seconds),
            max_requests=settings.reconcile_max_requests,
            max_pages=settings.reconcile_max_pages,
            max_wait=settings.reconcile_max_wait_seconds,
            lease=timedelta(seconds=settings.reconcile_lease_seconds),
            quota_reserve=settings.reconcile_quota_reserve,
            interval=(
                timedelta(seconds=settings.reconcile_interval_seconds)
                if settings.reconcile_interval_seconds > 0
                else None
            ),
            dedupe_retention=timedelta(days=settings.dedupe_retention_days),
        ),
        public_url=settings.public_url,
        clock=runtime.clock,
    )


def current_runtime() -> Runtime:
    """The runtime of the Flask app serving this request."""
    from flask import current_app

    runtime: Runtime = current_app.extensions["hooklatch"]
    return runtime
