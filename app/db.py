"""Declarative base, engine and session factories."""

from __future__ import annotations

import os
import secrets
import socket
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import (
    Connection,
    DateTime,
    Dialect,
    Engine,
    Index,
    Insert,
    MetaData,
    Table,
    create_engine,
    event,
    text,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


# A process that lost its database or Redis tries again after 1, 2, 4, 8, then every 10 s.
RECONNECT_MAX_SECONDS = 10.0


def reconnect_delay(failures: int) -> float:
    """How long to wait after ``failures`` failed tries in a row (however many)."""
    return min(0.5 * 2 ** min(failures, 5), RECONNECT_MAX_SECONDS)


_random = secrets.SystemRandom()


def backoff(attempt: int, *, base: float, maximum: float) -> timedelta:
    """Exponential backoff with jitter, for an event's attempts and a forward's: between
    half and all of base * 2^(attempt-1), at most ``maximum`` (the exponent is bounded, so
    no attempt count overflows it)."""
    ceiling = min(maximum, base * 2 ** min(attempt - 1, 64))
    return timedelta(seconds=_random.uniform(ceiling / 2, ceiling))


def partial_index(name: str, *columns: str, where: str) -> Index:
    """An index of the rows ``where`` holds, alike on PostgreSQL and SQLite."""
    return Index(name, *columns, postgresql_where=text(where), sqlite_where=text(where))


def normalize_url(url: str) -> str:
    """postgres:// and postgresql:// mean psycopg2, whatever SQLAlchemy's default driver is."""
    for scheme in ("postgres://", "postgresql://"):
        if url.startswith(scheme):
            return "postgresql+psycopg2://" + url[len(scheme) :]
    return url


# An execution option for a connection that only reads: on SQLite its transactions do not
# take the write lock, so it never waits behind a writer.
READ_ONLY = "hooklatch_read_only"


def make_engine(url: str, **kwargs: object) -> Engine:
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30}, **kwargs)
        _serialise_sqlite_writers(engine)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_size", 5)
        kwargs.setdefault("max_overflow", 10)
    if url.startswith("postgresql"):
        kwargs.setdefault("connect_args", {"connect_timeout": 5})
        # Batched UPDATEs (a worker's chunk of events) in one round trip per 100 rows.
        kwargs.setdefault("executemany_mode", "values_plus_batch")
    return create_engine(url, **kwargs)


def _serialise_sqlite_writers(engine: Engine) -> None:
    """Let SQLAlchemy drive transactions, and open each with BEGIN IMMEDIATE.

    pysqlite's own transaction handling breaks SAVEPOINT; taking the write lock at
    BEGIN makes a read-then-write (claim an event, then mark it) atomic across
    threads and processes, which is what row locks give on PostgreSQL.
    """

    @event.listens_for(engine, "connect")
    def _connect(
        dbapi_connection: sqlite3.Connection, connection_record: ConnectionPoolEntry
    ) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        if connection.get_execution_options().get(READ_ONLY):
            connection.exec_driver_sql("BEGIN")  # WAL: a reader never waits for a writer
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_session_factory(engine: Engine) -> sessionmaker:
    return sessionmaker(bind=engine, expire_on_commit=False)


def is_postgres(engine: Engine) -> bool:
    return engine.dialect.name == "postgresql"


def insert_ignoring_conflict(dialect: str, table: Table, columns: list[str]) -> Insert:
    """INSERT ... ON CONFLICT (columns) DO NOTHING, on PostgreSQL and SQLite."""
    if dialect == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=columns)
    if dialect == "sqlite":
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=columns)
    raise NotImplementedError(f"no conflict-free insert for {dialect}")


def lease_owner_name() -> str:
    """Who holds a lease (a reconcile run's, a destination's sender's): host, process and
    a random part (two holders in one process)."""
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
