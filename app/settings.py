"""Configuration, read once from the environment and validated at start."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet

from hooklatch.settings_values import (
    SettingsError,
    check_address,
    check_fernet_keys,
    check_networks,
    check_token,
    comma_list,
    folders,
    read_flag,
    read_float,
    read_int,
    refuse_renamed,
)

DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
DEFAULT_WORKER_BODY_BYTES = 32 * 1024 * 1024
# Below this, HOOKLATCH_WORKER_BODY_BYTES is more likely a size meant in MiB than bytes.
MIN_WORKER_BODY_BYTES = 64 * 1024

log = logging.getLogger(__name__)


# A bulk replay advances in steps of up to five seconds' worth: under 0.2 a second, a
# step would never be due.
MIN_REPLAY_RATE, MAX_REPLAY_RATE = 0.2, 10_000.0
# Retention clocks and the session's life, at most (a longer one overflows a date).
MAX_CLOCK_DAYS = 36_500


@dataclass(frozen=True)
class Settings:
    # URLs may hold passwords: none of these three appears in a repr (or a traceback).
    database_url: str | None = field(default=None, repr=False)
    redis_url: str | None = field(default=None, repr=False)
    secret_keys: tuple[str, ...] = field(default=(), repr=False)
    admin_token: str | None = field(default=None, repr=False)
    # Read-only access to /metrics for Prometheus (the admin token works too).
    metrics_token: str | None = field(default=None, repr=False)
    public_url: str = "http://127.0.0.1:8000"
    handlers: tuple[str, ...] = ()
    # Where the modules in `handlers` are looked for, besides the installed packages: the
    # working directory the process started in, as rq and uvicorn do (`--path`,
    # `--app-dir`). Added after the installed packages (hooklatch.handler_modules).
    handlers_path: tuple[Path, ...] = field(default_factory=lambda: (Path.cwd(),))
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    instance_path: Path = field(default_factory=lambda: Path.cwd() / "instance")
    queue_name: str = "hooklatch"
    max_attempts: int = 8
    # 8 attempts from 60 s doubling: the last one comes one to two hours after the first.
    retry_base_seconds: float = 60.0
    retry_max_seconds: float = 6 * 3600.0
    job_size: int = 1000
    relay_batch_size: int = 1000
    # The relay hands out new work only while fewer jobs than this wait in the queue:
    # meanwhile events wait in the outbox, and go out together in the next job. Jobs
    # then grow with the workers' lag instead of following the relay's polls.
    queued_jobs: int = 1
    # How often the relay looks for new outbox rows: adds up to this much to the time
    # from commit to handler start. An empty poll is one index scan.
    relay_poll_seconds: float = 0.05
    sweep_interval_seconds: float = 5.0
    # Work handed out less than this long ago is never re-dispatched: bounds churn when a
    # job keeps dying before it can record an attempt.
    dispatch_grace_seconds: float = 10.0
    # Lost dispatches before an event is marked dead: its handler keeps killing the
    # process (out of memory, a timeout), so no attempt could ever be recorded.
    max_lost_dispatches: int = 3
    start_dispatcher: bool = True
    # How long an event's dedupe key is kept. Refused at start when shorter than an
    # installed provider's retry window (a late retry would be stored a second time).
    dedupe_retention_days: float = 30.0
    # After this long a processed or ignored event's body and headers are deleted; its
    # row, dedupe key, SHA-256 and history stay until the dedupe clock. Dead and pending
    # events keep their payload.
    payload_retention_days: float = 7.0
    # Only for test and staging setups whose clocks run in seconds or minutes (under an
    # hour): start even when the dedupe clock is shorter than a provider's retry window (a
    # late retry of a deleted event is then stored and handled again). Logged at start as
    # a warning; a clock of an hour or more is refused whatever this says.
    unsafe_short_retention: bool = False
    # Retention runs in every relay: rows per statement, and the pause between passes
    # once nothing is left to do (a full batch is followed by the next one at once).
    cleanup_batch_size: int = 5000
    cleanup_interval_seconds: float = 5.0
    # Relays and workers write a heartbeat row this often; `hooklatch status` calls a
    # process silent after three missed beats.
    heartbeat_seconds: float = 5.0
    # The port each relay, and each worker, serves its metrics on (none when unset), at
    # `metrics_address`: a setting per process, so that one environment serves both on
    # one host (a second worker on a host needs a port of its own). The web process
    # serves /metrics on its own port, behind a token.
    relay_metrics_port: int | None = None
    worker_metrics_port: int | None = None
    # The address relays' and workers' metrics listen on: this host only, unless told.
    metrics_address: str = "127.0.0.1"
    # Numbers read from the database for /metrics and status are cached this long, so a
    # scrape never waits on a slow query.
    metrics_cache_seconds: float = 5.0
    # Server-side prepared statements on ingest connections. Turn off behind a pooler
    # in transaction mode (PgBouncer, any version: it tracks protocol-level prepared
    # statements only, never SQL PREPARE), where a session's statements vanish.
    prepare_statements: bool = True
    # Refused deliveries are counted in memory and written at most about once per this
    # many seconds per web process (after the first few), so a flood of bad signatures
    # is not a database write each; `endpoints show` is this far behind at most.
    refusal_flush_seconds: float = 2.0
    # Connections each web process stores deliveries on (PostgreSQL). A burst beyond them
    # waits for one: more would only add backends competing for the same cores, and a
    # pool that opened extra connections for a burst would close them again after it.
    ingest_connections: int = 3
    # How long a delivery waits for one of them before it is answered 503 (the provider
    # retries): well inside a provider's own 10 to 30 s timeout.
    ingest_wait_seconds: float = 5.0
    # A worker asked to stop (SIGTERM) finishes the chunk of events under way and hands the
    # rest of its job back; a chunk still running after this long is cut short (its
    # transaction rolls back, its events go out again). Well under Kubernetes' 30 s.
    worker_stop_seconds: float = 20.0
    # Jobs one work horse runs before the worker replaces it: what a handler leaks is
    # given back then, at the cost of one fork.
    worker_max_jobs: int = 500
    # The bodies and headers a worker reads at once, as its events run: a chunk of small
    # events is one read, and a larger body is read alone. What a work horse holds stays
    # within about four times this, or this and seven times the largest body (its text
    # and parsed payload), whatever its jobs hold (docs/architecture.md, "What a work
    # horse holds").
    worker_body_bytes: int = DEFAULT_WORKER_BODY_BYTES
    # The console (/admin/console): a sign-in with the admin token lasts this long; or,
    # behind a reverse proxy that authenticates people (oauth2-proxy), the request header
    # that names them, trusted only from these addresses (no default: a public proxy on
    # the same host must not be trusted by accident).
    admin_session_hours: float = 8.0
    admin_proxy_header: str | None = None
    admin_proxy_ips: tuple[str, ...] = ()
    # Reverse proxies in front of the web process (deploy/nginx.conf: the same host), whose
    # X-Forwarded-For names the client: only to tell clients apart (failed admin-token
    # attempts, the audit log's address), never to trust anyone.
    trusted_proxies: tuple[str, ...] = ("127.0.0.1", "::1")
    # Failed admin-token attempts (API, /metrics, console sign-in) from one client address
    # (an IPv6 one by its /64): this many within the window lock it out for the period,
    # during which every token it presents is refused, the right one too.
    admin_lockout_failures: int = 10
    admin_lockout_window_seconds: float = 600.0
    admin_lockout_seconds: float = 900.0
    # A bulk replay touches at most this many events, replayed this many a second, and
    # only while fewer than `replay_batch_window` replays wait to be run (their outbox rows).
    replay_batch_max: int = 10_000
    replay_batch_rate: float = 50.0
    replay_batch_window: int = 100
    # Audit entries are kept this long (a bulk replay, a secret removed: kept past the
    # events they were about).
    audit_retention_days: float = 365.0
    # Reconcile (hooklatch.reconcile): how often the relays run it per endpoint (0: only
    # by hand), and each run's overlap, budget, rate-limit wait, lease and quota reserve.
    reconcile_interval_seconds: float = 3600.0
    reconcile_overlap_seconds: float = 600.0
    reconcile_max_requests: int = 200
    reconcile_max_pages: int = 150
    reconcile_max_wait_seconds: float = 60.0
    reconcile_lease_seconds: float = 120.0
    reconcile_quota_reserve: int = 100
    # Forwarding (hooklatch.forwarding): how often an idle sender looks for forwards, the
    # attempts and pauses of a forward that fails, a destination's answer's bound, and
    # how long a relay holds a destination without renewing its lease.
    forward_poll_seconds: float = 0.1
    forward_max_attempts: int = 25
    forward_retry_base_seconds: float = 1.0
    forward_retry_max_seconds: float = 600.0
    forward_timeout_seconds: float = 10.0
    forward_lease_seconds: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        refuse_renamed(env)
        dedupe_days = read_float(env, "HOOKLATCH_DEDUPE_RETENTION_DAYS", cls.dedupe_retention_days)
        settings = cls(
            database_url=env.get("DATABASE_URL") or None,
            redis_url=env.get("REDIS_URL") or None,
            secret_keys=comma_list(env.get("HOOKLATCH_SECRET_KEYS")),
            admin_token=env.get("HOOKLATCH_ADMIN_TOKEN") or None,
            metrics_token=env.get("HOOKLATCH_METRICS_TOKEN") or None,
            public_url=(env.get("HOOKLATCH_PUBLIC_URL") or cls.public_url).rstrip("/"),
            handlers=comma_list(env.get("HOOKLATCH_HANDLERS")),
            handlers_path=folders(env.get("HOOKLATCH_HANDLERS_PATH")),
            max_body_bytes=read_int(
                env, "HOOKLATCH_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES, minimum=1
            ),
            instance_path=Path(env.get("HOOKLATCH_INSTANCE_PATH") or Path.cwd() / "instance"),
            queue_name=env.get("HOOKLATCH_QUEUE") or cls.queue_name,
            max_attempts=read_int(env, "HOOKLATCH_MAX_ATTEMPTS", cls.max_attempts, minimum=1),
            retry_base_seconds=read_float(
                env, "HOOKLATCH_RETRY_BASE_SECONDS", cls.retry_base_seconds
            ),
            retry_max_seconds=read_float(env, "HOOKLATCH_RETRY_MAX_SECONDS", cls.retry_max_seconds),
            job_size=read_int(env, "HOOKLATCH_JOB_SIZE", cls.job_size, minimum=1),
            queued_jobs=read_int(env, "HOOKLATCH_QUEUED_JOBS", cls.queued_jobs, minimum=1),
            max_lost_dispatches=read_int(env, "HOOKLATCH_MAX_LOST_DISPATCHES", 3, minimum=1),
            dispatch_grace_seconds=read_float(
                env, "HOOKLATCH_DISPATCH_GRACE_SECONDS", cls.dispatch_grace_seconds
            ),
            relay_poll_seconds=read_float(
                env, "HOOKLATCH_RELAY_POLL_SECONDS", cls.relay_poll_seconds
            ),
            prepare_statements=read_flag(env, "HOOKLATCH_PREPARE_STATEMENTS", True),
            dedupe_retention_days=dedupe_days,
            # Unset, it follows a shorter dedupe clock down; set, it must not exceed it.
            payload_retention_days=read_float(
                env,
                "HOOKLATCH_PAYLOAD_RETENTION_DAYS",
                min(cls.payload_retention_days, dedupe_days),
            ),
            unsafe_short_retention=read_flag(env, "HOOKLATCH_UNSAFE_SHORT_RETENTION", False),
            cleanup_batch_size=read_int(
                env, "HOOKLATCH_CLEANUP_BATCH_SIZE", cls.cleanup_batch_size, minimum=1
            ),
            cleanup_interval_seconds=read_float(
                env, "HOOKLATCH_CLEANUP_INTERVAL_SECONDS", cls.cleanup_interval_seconds
            ),
            heartbeat_seconds=read_float(env, "HOOKLATCH_HEARTBEAT_SECONDS", cls.heartbeat_seconds),
            relay_metrics_port=read_int(env, "HOOKLATCH_RELAY_METRICS_PORT", 0, minimum=0) or None,
            worker_metrics_port=read_int(env, "HOOKLATCH_WORKER_METRICS_PORT", 0, minimum=0)
            or None,
            metrics_address=(env.get("HOOKLATCH_METRICS_ADDRESS") or cls.metrics_address).strip(),
            metrics_cache_seconds=read_float(
                env, "HOOKLATCH_METRICS_CACHE_SECONDS", cls.metrics_cache_seconds
            ),
            sweep_interval_seconds=read_float(
                env, "HOOKLATCH_SWEEP_INTERVAL_SECONDS", cls.sweep_interval_seconds
            ),
            refusal_flush_seconds=read_float(
                env, "HOOKLATCH_REFUSAL_FLUSH_SECONDS", cls.refusal_flush_seconds
            ),
            ingest_connections=read_int(
                env, "HOOKLATCH_INGEST_CONNECTIONS", cls.ingest_connections, minimum=1
            ),
            worker_max_jobs=read_int(
                env, "HOOKLATCH_WORKER_MAX_JOBS", cls.worker_max_jobs, minimum=1
            ),
            worker_body_bytes=read_int(
                env,
                "HOOKLATCH_WORKER_BODY_BYTES",
                cls.worker_body_bytes,
                minimum=MIN_WORKER_BODY_BYTES,
            ),
            admin_session_hours=read_float(
                env, "HOOKLATCH_ADMIN_SESSION_HOURS", cls.admin_session_hours
            ),
            admin_proxy_header=env.get("HOOKLATCH_ADMIN_PROXY_HEADER") or None,
            admin_proxy_ips=comma_list(env.get("HOOKLATCH_ADMIN_PROXY_IPS")),
            trusted_proxies=(
                comma_list(env["HOOKLATCH_TRUSTED_PROXIES"])
                if "HOOKLATCH_TRUSTED_PROXIES" in env
                else cls.trusted_proxies
            ),
            admin_lockout_failures=read_int(
                env, "HOOKLATCH_ADMIN_LOCKOUT_FAILURES", cls.admin_lockout_failures, minimum=1
            ),
            admin_lockout_window_seconds=read_float(
                env, "HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS", cls.admin_lockout_window_seconds
            ),
            admin_lockout_seconds=read_float(
                env, "HOOKLATCH_ADMIN_LOCKOUT_SECONDS", cls.admin_lockout_seconds
            ),
            replay_batch_max=read_int(
                env, "HOOKLATCH_REPLAY_BATCH_MAX", cls.replay_batch_max, minimum=1
            ),
            replay_batch_rate=read_float(env, "HOOKLATCH_REPLAY_BATCH_RATE", cls.replay_batch_rate),
            reconcile_interval_seconds=read_float(
                env, "HOOKLATCH_RECONCILE_INTERVAL_SECONDS", cls.reconcile_interval_seconds
            ),
            reconcile_overlap_seconds=read_float(
                env, "HOOKLATCH_RECONCILE_OVERLAP_SECONDS", cls.reconcile_overlap_seconds
            ),
            reconcile_max_requests=read_int(
                env, "HOOKLATCH_RECONCILE_MAX_REQUESTS", cls.reconcile_max_requests, minimum=1
            ),
            reconcile_max_pages=read_int(
                env, "HOOKLATCH_RECONCILE_MAX_PAGES", cls.reconcile_max_pages, minimum=1
            ),
            reconcile_max_wait_seconds=read_float(
                env, "HOOKLATCH_RECONCILE_MAX_WAIT_SECONDS", cls.reconcile_max_wait_seconds
            ),
            reconcile_lease_seconds=read_float(
                env, "HOOKLATCH_RECONCILE_LEASE_SECONDS", cls.reconcile_lease_seconds
            ),
            reconcile_quota_reserve=read_int(
                env, "HOOKLATCH_RECONCILE_QUOTA_RESERVE", cls.reconcile_quota_reserve, minimum=0
            ),
            forward_poll_seconds=read_float(
                env, "HOOKLATCH_FORWARD_POLL_SECONDS", cls.forward_poll_seconds
            ),
            forward_max_attempts=read_int(
                env, "HOOKLATCH_FORWARD_MAX_ATTEMPTS", cls.forward_max_attempts, minimum=1
            ),
            forward_retry_base_seconds=read_float(
                env, "HOOKLATCH_FORWARD_RETRY_BASE_SECONDS", cls.forward_retry_base_seconds
            ),
            forward_retry_max_seconds=read_float(
                env, "HOOKLATCH_FORWARD_RETRY_MAX_SECONDS", cls.forward_retry_max_seconds
            ),
            forward_timeout_seconds=read_float(
                env, "HOOKLATCH_FORWARD_TIMEOUT_SECONDS", cls.forward_timeout_seconds
            ),
            forward_lease_seconds=read_float(
                env, "HOOKLATCH_FORWARD_LEASE_SECONDS", cls.forward_lease_seconds
            ),
            replay_batch_window=read_int(
                env, "HOOKLATCH_REPLAY_BATCH_WINDOW", cls.replay_batch_window, minimum=1
            ),
            audit_retention_days=read_float(
                env, "HOOKLATCH_AUDIT_RETENTION_DAYS", cls.audit_retention_days
            ),
            worker_stop_seconds=read_float(
                env, "HOOKLATCH_WORKER_STOP_SECONDS", cls.worker_stop_seconds
            ),
        )
        return settings.validated()

    @property
    def embedded(self) -> bool:
        """No Redis configured: events are dispatched by a thread inside the web process."""
        return self.redis_url is None

    @property
    def fetched_queue_name(self) -> str:
        """Jobs of events a reconcile fetched: workers read this queue after the live one
        (HOOKLATCH_QUEUE)."""
        return f"{self.queue_name}-fetched"

    @property
    def replay_queue_name(self) -> str:
        """Replays' jobs: workers read this queue after the live and fetched ones."""
        return f"{self.queue_name}-replays"

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.instance_path / 'hooklatch.sqlite3'}"

    def validated(self) -> Settings:
        if self.database_url and not self.database_url.startswith(
            ("postgres://", "postgresql", "sqlite")
        ):
            raise SettingsError("DATABASE_URL must be a postgresql:// or sqlite:// URL")
        if self.redis_url and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise SettingsError("REDIS_URL must be a redis://, rediss:// or unix:// URL")
        if not self.public_url.startswith(("http://", "https://")):
            raise SettingsError("HOOKLATCH_PUBLIC_URL must start with http:// or https://")
        if self.retry_max_seconds < self.retry_base_seconds:
            raise SettingsError(
                "HOOKLATCH_RETRY_MAX_SECONDS must not be smaller than HOOKLATCH_RETRY_BASE_SECONDS"
            )
        if self.dedupe_retention_days <= 0 or self.payload_retention_days <= 0:
            raise SettingsError(
                "HOOKLATCH_DEDUPE_RETENTION_DAYS and HOOKLATCH_PAYLOAD_RETENTION_DAYS must be "
                "more than 0"
            )
        if self.payload_retention_days > self.dedupe_retention_days:
            raise SettingsError(
                f"HOOKLATCH_PAYLOAD_RETENTION_DAYS={self.payload_retention_days:g} is longer "
                f"than HOOKLATCH_DEDUPE_RETENTION_DAYS={self.dedupe_retention_days:g}: an "
                "event's row, payload included, is deleted at the dedupe clock"
            )
        check_token("HOOKLATCH_ADMIN_TOKEN", self.admin_token)
        check_token("HOOKLATCH_METRICS_TOKEN", self.metrics_token)
        check_networks("HOOKLATCH_ADMIN_PROXY_IPS", self.admin_proxy_ips)
        check_networks("HOOKLATCH_TRUSTED_PROXIES", self.trusted_proxies)
        if self.admin_proxy_header and not self.admin_proxy_ips:
            raise SettingsError(
                "HOOKLATCH_ADMIN_PROXY_HEADER needs HOOKLATCH_ADMIN_PROXY_IPS: the addresses of "
                "the proxy that signs people in, the only ones its header is trusted from"
            )
        if not MIN_REPLAY_RATE <= self.replay_batch_rate <= MAX_REPLAY_RATE:
            raise SettingsError(
                f"HOOKLATCH_REPLAY_BATCH_RATE must be from {MIN_REPLAY_RATE:g} to "
                f"{MAX_REPLAY_RATE:g} replays a second, got {self.replay_batch_rate:g}"
            )
        for name, days in (
            ("HOOKLATCH_DEDUPE_RETENTION_DAYS", self.dedupe_retention_days),
            ("HOOKLATCH_PAYLOAD_RETENTION_DAYS", self.payload_retention_days),
            ("HOOKLATCH_AUDIT_RETENTION_DAYS", self.audit_retention_days),
            ("HOOKLATCH_ADMIN_SESSION_HOURS", self.admin_session_hours / 24),
            ("HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS", self.admin_lockout_window_seconds / 86400),
            ("HOOKLATCH_ADMIN_LOCKOUT_SECONDS", self.admin_lockout_seconds / 86400),
        ):
            if days > MAX_CLOCK_DAYS:
                raise SettingsError(f"{name} must be at most {MAX_CLOCK_DAYS} days")
        for name, seconds in (
            ("HOOKLATCH_ADMIN_SESSION_HOURS", self.admin_session_hours),
            ("HOOKLATCH_REPLAY_BATCH_RATE", self.replay_batch_rate),
            ("HOOKLATCH_AUDIT_RETENTION_DAYS", self.audit_retention_days),
            ("HOOKLATCH_HEARTBEAT_SECONDS", self.heartbeat_seconds),
            ("HOOKLATCH_CLEANUP_INTERVAL_SECONDS", self.cleanup_interval_seconds),
            ("HOOKLATCH_METRICS_CACHE_SECONDS", self.metrics_cache_seconds),
            ("HOOKLATCH_ADMIN_LOCKOUT_WINDOW_SECONDS", self.admin_lockout_window_seconds),
            ("HOOKLATCH_ADMIN_LOCKOUT_SECONDS", self.admin_lockout_seconds),
            ("HOOKLATCH_RECONCILE_LEASE_SECONDS", self.reconcile_lease_seconds),
            ("HOOKLATCH_FORWARD_POLL_SECONDS", self.forward_poll_seconds),
            ("HOOKLATCH_FORWARD_RETRY_BASE_SECONDS", self.forward_retry_base_seconds),
            ("HOOKLATCH_FORWARD_TIMEOUT_SECONDS", self.forward_timeout_seconds),
            ("HOOKLATCH_FORWARD_LEASE_SECONDS", self.forward_lease_seconds),
        ):
            if seconds <= 0:  # a loop that never waits, against the database
                raise SettingsError(f"{name} must be more than 0, got {seconds:g}")
        if self.forward_lease_seconds < 2 * self.forward_timeout_seconds:
            # A sender renews its lease between two calls to its destination, each of
            # which may take the timeout: a shorter lease could run out within a call.
            raise SettingsError(
                "HOOKLATCH_FORWARD_LEASE_SECONDS must be at least twice "
                f"HOOKLATCH_FORWARD_TIMEOUT_SECONDS ({self.forward_timeout_seconds:g} s), "
                f"got {self.forward_lease_seconds:g}"
            )
        for name, port in (
            ("HOOKLATCH_RELAY_METRICS_PORT", self.relay_metrics_port),
            ("HOOKLATCH_WORKER_METRICS_PORT", self.worker_metrics_port),
        ):
            if port is not None and port > 65535:
                raise SettingsError(f"{name} must be a port, got {port}")
        check_address("HOOKLATCH_METRICS_ADDRESS", self.metrics_address)
        check_fernet_keys(self.secret_keys)
        if not self.secret_keys and self.database_url:
            raise SettingsError(
                "HOOKLATCH_SECRET_KEYS is required when DATABASE_URL is set: endpoint secrets "
                "are encrypted with it. Make one with `hooklatch keys generate`."
            )
        return self

    def with_embedded_key(self) -> Settings:
        """The embedded default (no DATABASE_URL) keeps a generated key in the instance folder."""
        if self.secret_keys or self.database_url:
            return self
        key_file = self.instance_path / "secret.key"
        if not key_file.exists():
            self.instance_path.mkdir(parents=True, exist_ok=True)
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(Fernet.generate_key().decode())
        return replace(self, secret_keys=(key_file.read_text().strip(),))


# HOOKLATCH_UNSAFE_SHORT_RETENTION forces a dedupe clock shorter than this only: clocks
# in seconds or minutes are a test setup's; one of hours or days could be meant.
UNSAFE_RETENTION_LIMIT = timedelta(hours=1)


def check_retention(settings: Settings, providers: Mapping[str, Any]) -> None:
    """Dedupe keys must outlive every installed provider's retries."""
    retention = timedelta(days=settings.dedupe_retention_days)
    short = {
        name: provider.retry_window
        for name, provider in sorted(providers.items())
        if retention < provider.retry_window
    }
    if not short:
        return
    if settings.unsafe_short_retention:
        if retention >= UNSAFE_RETENTION_LIMIT:
            raise SettingsError(
                "HOOKLATCH_UNSAFE_SHORT_RETENTION is only for dedupe clocks under an hour "
                "(test setups), and HOOKLATCH_DEDUPE_RETENTION_DAYS="
                f"{settings.dedupe_retention_days:g} is shorter than the retry window of "
                f"{', '.join(short)}: a retry arriving after its event's dedupe key was "
                "removed would be stored and handled a second time"
            )
        log.warning(
            "HOOKLATCH_UNSAFE_SHORT_RETENTION: dedupe keys are kept %g days, less than the "
            "retry window of %s: their late retries are stored and handled again",
            settings.dedupe_retention_days,
            ", ".join(short),
        )
        return
    name, window = next(iter(short.items()))
    raise SettingsError(
        f"HOOKLATCH_DEDUPE_RETENTION_DAYS={settings.dedupe_retention_days:g} is shorter "
        f"than provider {name!r}'s retry window ({window.total_seconds() / 86400:g} "
        "days): a retry arriving after its event's dedupe key was removed would be "
        "stored and handled a second time"
    )
