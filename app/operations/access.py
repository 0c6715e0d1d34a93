"""Who may use the admin surfaces: console sessions, and failed admin-token attempts.

- **Console sessions.** A sign-in with the admin token is a ``console_sessions`` row
  holding the SHA-256 of a random token; the cookie carries the token. Every console
  request looks the row up: sign-out deletes it, so a copy of the cookie opens nothing
  afterwards; an expired one signs nobody in, and retention deletes it.
- **Failed attempts.** Every admin-token check (the admin API, /metrics, the console's
  sign-in) goes through one ``TokenGuard``. Failures are counted per client address (the
  direct peer, or behind HOOKLATCH_TRUSTED_PROXIES the address they appended to
  X-Forwarded-For: ``requester``; an IPv6 one by its /64) in ``token_failures``, so that
  every web process shares them: HOOKLATCH_ADMIN_LOCKOUT_FAILURES of them within the
  window lock the address out for HOOKLATCH_ADMIN_LOCKOUT_SECONDS. A process compares one
  token from an address at a time, and refuses every token from a locked-out address
  without comparing it once it has seen the lockout (it learns of it when it counts that
  address's next failure). A right token costs no database work.

Service functions take the session first and never commit.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import math
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from hooklatch.errors import TooManyAttempts
from hooklatch.operations.models import ConsoleSession, TokenFailures

if TYPE_CHECKING:
    from hooklatch.runtime import Runtime
    from hooklatch.settings import Settings

log = logging.getLogger(__name__)

SESSION_TOKEN_BYTES = 32
# Lockouts a process keeps in memory, at most (one per client address).
REMEMBERED = 10_000
# While the database does not answer, the guard says so at most this often.
WARN_EVERY_SECONDS = 60.0
GUARD = "hooklatch.token_guard"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def open_session(session: Session, *, name: str, now: datetime, lifetime: timedelta) -> str:
    """A new console session for ``name``; returns the token its cookie is to carry."""
    token = secrets.token_urlsafe(SESSION_TOKEN_BYTES)
    session.add(
        ConsoleSession(
            token_sha256=token_hash(token), name=name, signed_in_at=now, expires_at=now + lifetime
        )
    )
    session.flush()
    return token


def session_name(session: Session, token: str, *, now: datetime) -> str | None:
    """Who the session of ``token`` signed in; None once it is over (signed out, expired)."""
    row = session.get(ConsoleSession, token_hash(token))
    if row is None or row.expires_at <= now:
        return None
    return row.name


def close_session(session: Session, token: str) -> None:
    session.execute(delete(ConsoleSession).where(ConsoleSession.token_sha256 == token_hash(token)))


def requester(peer: str | None, forwarded_for: str | None, trusted: Sequence[str]) -> str | None:
    """The address a request came from: the direct peer, or, while that is one of the
    reverse proxies in ``trusted`` (HOOKLATCH_TRUSTED_PROXIES), the address it says it
    was sent from: the last ``X-Forwarded-For`` entry, then the one before while that too
    is a trusted proxy. Each proxy appends the address it saw, so what a client writes in
    the header itself stays to the left and is never reached. Used to tell clients apart
    (failed attempts, the audit log), never to trust one. A peer with no address (a unix
    socket) is a proxy on this host: taken as trusted."""
    hops = [hop.strip() for hop in (forwarded_for or "").split(",")]
    address = peer
    local = _ip(peer) is None
    while hops and (local or within(address, trusted)):
        local = False
        hop = _ip(hops.pop())
        if hop is None:
            break
        address = str(hop)
    return address


def request_address() -> str | None:
    """``requester`` of the Flask request being served."""
    from flask import current_app, request

    settings = current_app.extensions["hooklatch"].settings
    forwarded = request.headers.get("X-Forwarded-For")
    return requester(request.remote_addr, forwarded, settings.trusted_proxies)


def within(address: str | None, networks: Sequence[str]) -> bool:
    """Whether ``address`` is in one of ``networks`` (an IPv4-mapped IPv6 address, as a
    dual-stack socket gives, as IPv4)."""
    ip = _ip(address)
    return ip is not None and any(
        ip in ipaddress.ip_network(network, strict=False) for network in networks
    )


def _ip(text: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as a peer or a proxy writes it: with or without a port
    (``203.0.113.7:51234``, ``[2001:db8::1]:443``); IPv4-mapped as IPv4; None if none."""
    text = (text or "").strip()
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def client_address(address: str | None) -> str:
    """What failures are counted against: the address, an IPv6 one by its /64 (one
    subscriber's network holds billions of addresses), "unknown" without one."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


@dataclass(frozen=True)
class Lockout:
    until: datetime
    failures: int  # the failures that led to it
    new: bool  # set by this attempt (False: another process had set it meanwhile)


def count_failure(
    session: Session, address: str, *, now: datetime, settings: Settings
) -> Lockout | None:
    """One more failed attempt from ``address``; the lockout it ends in, if it does. The
    row is locked, so concurrent failures from every process add up and one of them
    (one log line) sets the lockout."""
    window = timedelta(seconds=settings.admin_lockout_window_seconds)
    row = _locked_row(session, address, now=now, window=window)
    if row.locked_until is not None and row.locked_until > now:
        return Lockout(row.locked_until, row.failures, new=False)
    if row.window_started_at + window <= now:
        row.failures, row.window_started_at = 0, now
    row.failures += 1
    row.expires_at = row.window_started_at + window
    if row.failures < settings.admin_lockout_failures:
        return None
    lockout = Lockout(now + timedelta(seconds=settings.admin_lockout_seconds), row.failures, True)
    # After the lockout the address starts again from no failure.
    row.locked_until, row.expires_at = lockout.until, lockout.until
    row.failures, row.window_started_at = 0, now
    return lockout


def _locked_row(
    session: Session, address: str, *, now: datetime, window: timedelta
) -> TokenFailures:
    """The address's row, made if missing, locked. Made again if retention deleted it
    between the two statements (its window was over)."""
    insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert
    while True:
        session.execute(
            insert(TokenFailures)
            .values(address=address, failures=0, window_started_at=now, expires_at=now + window)
            .on_conflict_do_nothing(index_elements=["address"])
        )
        row = session.scalars(
            select(TokenFailures).where(TokenFailures.address == address).with_for_update()
        ).one_or_none()
        if row is not None:
            return row


class TokenGuard:
    """The admin-token check of one web process, shared by the admin API, /metrics and
    the console's sign-in. It remembers the lockouts it has seen, so that a flood from a
    locked-out address costs no database work once seen."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._seen: dict[str, datetime] = {}
        self._lock = threading.Lock()
        # One token compared (and counted) at a time per address: else every request
        # already in flight is compared before the failures that lock it out are counted.
        # An address's lock lives while requests from it wait for it.
        self._turns: dict[str, tuple[threading.Lock, list[int]]] = {}
        self._warned_at = -math.inf

    def check(self, given: str, tokens: Sequence[str], *, address: str | None) -> bool:
        """Whether ``given`` is one of ``tokens``. Raises ``TooManyAttempts`` while the
        client's address is locked out (as far as this process has seen), before
        comparing anything; a wrong token counts against it (an empty one, nothing given,
        does not)."""
        client = client_address(address)
        self._refuse_if_locked_out(client)
        if not given:
            return False
        with self._turn(client):
            self._refuse_if_locked_out(client)  # found by the request this one waited for
            if self._full():
                self._refuse_if_stored(client)  # one this process could not remember
            # Every token compared, in constant time.
            matched = [hmac.compare_digest(given.encode(), token.encode()) for token in tokens]
            if any(matched):
                return True
            return self._failed(client)

    @contextmanager
    def _turn(self, client: str) -> Iterator[None]:
        with self._lock:
            lock, waiting = self._turns.setdefault(client, (threading.Lock(), [0]))
            waiting[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._lock:
                waiting[0] -= 1
                if not waiting[0]:
                    del self._turns[client]

    def _full(self) -> bool:
        with self._lock:
            return len(self._seen) >= REMEMBERED

    def _refuse_if_stored(self, client: str) -> None:
        """While the lockouts seen overflow what a process remembers, the database is
        asked before any token is compared."""
        now = self.runtime.clock()
        try:
            with self.runtime.session_factory() as session:
                until = session.scalar(
                    select(TokenFailures.locked_until).where(TokenFailures.address == client)
                )
        except SQLAlchemyError as exc:
            self._warn("read", exc)
            return
        if until is not None and until > now:
            raise _refusal(until, now)

    def _refuse_if_locked_out(self, client: str) -> None:
        now = self.runtime.clock()
        until = self._remembered(client, now)
        if until is not None:
            raise _refusal(until, now)

    def _failed(self, client: str) -> bool:
        """Count a wrong token; raise once the address is locked out."""
        now = self.runtime.clock()
        lockout = self._count(client, now)
        if lockout is None:
            return False
        self._remember(client, lockout.until)
        if lockout.new:
            log.warning(
                "%d failed admin-token attempts from %s within %g s: locked out until %s",
                lockout.failures,
                client,
                self.runtime.settings.admin_lockout_window_seconds,
                lockout.until.isoformat(timespec="seconds"),
                extra={"client_address": client},
            )
        raise _refusal(lockout.until, now)

    def _remembered(self, client: str, now: datetime) -> datetime | None:
        with self._lock:
            until = self._seen.get(client)
            if until is not None and until <= now:
                del self._seen[client]
                return None
            return until

    def _remember(self, client: str, until: datetime) -> None:
        with self._lock:
            if len(self._seen) >= REMEMBERED:
                now = self.runtime.clock()
                self._seen = {c: u for c, u in self._seen.items() if u > now}
            if len(self._seen) < REMEMBERED:  # else checks ask the database (_full)
                self._seen[client] = until

    def _count(self, client: str, now: datetime) -> Lockout | None:
        try:
            with self.runtime.session_factory.begin() as session:
                return count_failure(session, client, now=now, settings=self.runtime.settings)
        except SQLAlchemyError as exc:
            self._warn("counted", exc)
            return None

    def _warn(self, what: str, exc: Exception) -> None:
        """The database did not answer: only the lockouts this process has seen hold
        until it does (refusing every token instead would lock the operators out)."""
        if time.monotonic() - self._warned_at < WARN_EVERY_SECONDS:
            return
        self._warned_at = time.monotonic()
        log.warning(
            "failed admin-token attempts cannot be %s (%s: the database did not answer): "
            "only the lockouts this process has seen are enforced until it does",
            what,
            type(exc).__name__,
        )


def _refusal(until: datetime, now: datetime) -> TooManyAttempts:
    wait = max(1, math.ceil((until - now).total_seconds()))
    return TooManyAttempts(
        "too many failed admin-token attempts from this address: every token it presents "
        f"is refused until {until.strftime('%Y-%m-%d %H:%M:%S')} UTC",
        retry_after=wait,
    )


def current_guard() -> TokenGuard:
    """The guard of the Flask app serving this request, made when first needed."""
    from flask import current_app

    extensions: dict[str, Any] = current_app.extensions
    guard = extensions.get(GUARD)
    if guard is None:
        guard = extensions.setdefault(GUARD, TokenGuard(extensions["hooklatch"]))
    assert isinstance(guard, TokenGuard)
    return guard
