"""Endpoints and their secrets. Functions take the session first and never commit."""

from __future__ import annotations

import secrets as random_tokens
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Connection, Select, bindparam, case, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from hooklatch.crypto import SecretBox
from hooklatch.endpoints.models import (
    ID_LENGTH,
    NAME_LENGTH,
    Endpoint,
    EndpointSecret,
    Refusal,
)
from hooklatch.endpoints.ordering import OrderingSettings
from hooklatch.errors import BadRequest, Conflict, NotFound, SecretUnavailable, storable
from hooklatch.providers.base import Provider


@dataclass(frozen=True)
class ActiveEndpoint:
    id: str
    provider: str
    secrets: list[str] = field(repr=False)
    # "3,7": the ids of the secrets above. Storing an event checks them against the
    # database in the same statement, so a cached copy can never outlive a change.
    secret_ids: str = ""
    options: dict[str, str] = field(default_factory=dict)
    # How its events are keyed at ingest (hooklatch.ordering.keys), as of ``revision``,
    # which the storing statement checks too.
    ordering: OrderingSettings = field(default_factory=OrderingSettings)
    revision: int = 0


# A refusal from a cached copy is confirmed against the database before it is answered,
# but a flood of bad signatures must not make each one a query: per endpoint and process,
# this many confirmations at once, then this many per second (a token bucket).
RECHECK_BURST = 5
RECHECKS_PER_SECOND = 1.0


class EndpointCache:
    """Verification material of recently seen endpoints, per process.

    An entry is only ever used optimistically: the statement that stores the event
    also checks that the endpoint is still enabled with exactly these secrets, and a
    signature that fails against the cached secrets is checked again against the
    database's before it is refused (``may_recheck``). So adding a secret, removing one
    and disabling an endpoint all take effect at once, while the common request skips a
    query. Only while an endpoint's refusals come faster than the rechecks allowed is a
    refusal answered from the cache: a secret added then is seen at the next recheck,
    within 1 / ``rechecks_per_second`` seconds.
    """

    def __init__(
        self,
        size: int = 1024,
        *,
        recheck_burst: int = RECHECK_BURST,
        rechecks_per_second: float = RECHECKS_PER_SECOND,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.size = size
        self.recheck_burst = recheck_burst
        self.rechecks_per_second = rechecks_per_second
        self.clock = clock
        self._entries: dict[str, ActiveEndpoint] = {}
        self._rechecks: dict[str, tuple[float, float]] = {}  # id: (tokens, when counted)

    def get(self, endpoint_id: str) -> ActiveEndpoint | None:
        return self._entries.get(endpoint_id)

    def put(self, endpoint: ActiveEndpoint) -> None:
        if len(self._entries) >= self.size and endpoint.id not in self._entries:
            self._entries.clear()
            self._rechecks.clear()
        self._entries[endpoint.id] = endpoint

    def drop(self, endpoint_id: str) -> None:
        self._entries.pop(endpoint_id, None)

    def may_recheck(self, endpoint_id: str) -> bool:
        """Whether a refusal of ``endpoint_id``'s cached copy may be confirmed against the
        database now (taking a token), or must be answered from the cache."""
        now = self.clock()
        tokens, counted = self._rechecks.get(endpoint_id, (self.recheck_burst, now))
        tokens = min(self.recheck_burst, tokens + (now - counted) * self.rechecks_per_second)
        allowed = tokens >= 1
        self._rechecks[endpoint_id] = (tokens - 1 if allowed else tokens, now)
        return allowed


ENCRYPTED = "fernet:"


def decrypt_options(options: Mapping[str, str] | None, box: SecretBox) -> dict[str, str]:
    return {
        key: box.decrypt(value[len(ENCRYPTED) :].encode()) if value.startswith(ENCRYPTED) else value
        for key, value in (options or {}).items()
    }


def shown_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """Options as `endpoints show` prints them: secret ones masked."""
    return {
        key: "(secret)" if value.startswith(ENCRYPTED) else value
        for key, value in (options or {}).items()
    }


def generate_secret() -> str:
    return random_tokens.token_urlsafe(32)


def create_endpoint(
    session: Session,
    *,
    provider: Provider,
    name: str,
    secrets: list[str],
    box: SecretBox,
    options: Mapping[str, str] | None = None,
) -> tuple[Endpoint, list[str]]:
    """Create an endpoint; returns it with its plaintext secrets.

    Where the receiver chooses the secret (GitHub) and none is given, one is generated.
    Where the provider chooses it (Stripe shows it only once it has the URL), the endpoint
    starts with none and refuses every delivery (no_secret) until one is added.
    """
    if not 0 < len(name) <= NAME_LENGTH or not storable(name):
        raise BadRequest(
            f"a name is 1 to {NAME_LENGTH} characters, with no NUL", reason="bad_parameter"
        )
    if not secrets and provider.generates_secret:
        secrets = [generate_secret()]
    if session.scalar(select(Endpoint.id).where(Endpoint.name == name)) is not None:
        raise Conflict(f"an endpoint named {name!r} exists already", reason="name_taken")
    try:
        checked = provider.check_options(dict(options or {}))
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_option") from exc
    stored = {
        key: ENCRYPTED + box.encrypt(value).decode() if key in provider.secret_options else value
        for key, value in checked.items()
    }
    endpoint = Endpoint(
        id="ep_" + random_tokens.token_hex(10),
        name=name,
        provider=provider.name,
        options=stored or None,
    )
    session.add(endpoint)
    for secret in secrets:
        add_secret(session, endpoint, secret, box=box)
    session.flush()
    return endpoint, secrets


def add_secret(
    session: Session, endpoint: Endpoint, secret: str, *, box: SecretBox
) -> EndpointSecret:
    if not secret:
        raise BadRequest("a secret cannot be empty", reason="empty_secret")
    row = EndpointSecret(ciphertext=box.encrypt(secret), fingerprint=box.fingerprint(secret))
    endpoint.secrets.append(row)
    session.flush()
    return row


def rotate_keys(session: Session, box: SecretBox) -> int:
    """Re-encrypt every stored secret and encrypted option with the first key, and key
    the secrets' fingerprints to it; returns how many values were re-encrypted. A value
    no key decrypts raises ValueError, and the caller's transaction changes nothing."""
    rotated = 0
    for row in session.scalars(select(EndpointSecret)):
        row.ciphertext = box.rotate(row.ciphertext)
        row.fingerprint = box.fingerprint(box.decrypt(row.ciphertext))
        rotated += 1
    for endpoint in session.scalars(select(Endpoint)):
        encrypted = {k: v for k, v in (endpoint.options or {}).items() if v.startswith(ENCRYPTED)}
        if encrypted:
            endpoint.options = {
                **(endpoint.options or {}),
                **{
                    key: ENCRYPTED + box.rotate(value[len(ENCRYPTED) :].encode()).decode()
                    for key, value in encrypted.items()
                },
            }
            rotated += len(encrypted)
    session.flush()
    return rotated


def refresh_fingerprints(session: Session, box: SecretBox) -> tuple[int, int]:
    """Key every secret's fingerprint to the first key (rows stored before fingerprints
    were keyed hold a bare SHA-256 prefix). Returns how many changed and how many could
    not be decrypted, which keep theirs."""
    changed = unreadable = 0
    for row in session.scalars(select(EndpointSecret)):
        try:
            keyed = box.fingerprint(box.decrypt(row.ciphertext))
        except ValueError:
            unreadable += 1
            continue
        if row.fingerprint != keyed:
            row.fingerprint = keyed
            changed += 1
    session.flush()
    return changed, unreadable


def remove_secret(session: Session, endpoint: Endpoint, secret_ref: str) -> EndpointSecret:
    """Remove by secret id or fingerprint. The last secret cannot be removed."""
    matches = [s for s in endpoint.secrets if secret_ref in (str(s.id), s.fingerprint)]
    if not matches:
        raise NotFound(f"endpoint {endpoint.id} has no secret {secret_ref!r}")
    if len(endpoint.secrets) == 1:
        raise Conflict(
            "cannot remove the endpoint's only secret: add the new one first",
            reason="last_secret",
        )
    row = matches[0]
    endpoint.secrets.remove(row)
    session.flush()
    return row


def get_endpoint(session: Session, ref: str) -> Endpoint:
    """By id or by name."""
    endpoint = session.scalar(select(Endpoint).where((Endpoint.id == ref) | (Endpoint.name == ref)))
    if endpoint is None:
        raise NotFound(f"no endpoint {ref!r}")
    return endpoint


@cache
def _active_endpoint_query() -> Select[*tuple[Any, ...]]:
    # Built once: constructing a statement costs more than running this one.
    return (
        select(
            Endpoint.provider,
            Endpoint.enabled,
            Endpoint.options,
            Endpoint.revision,
            Endpoint.ordering,
            Endpoint.ordering_dead,
            Endpoint.hold_seconds,
            Endpoint.ordering_key_path,
            EndpointSecret.id,
            EndpointSecret.ciphertext,
        )
        .outerjoin(EndpointSecret, EndpointSecret.endpoint_id == Endpoint.id)
        .where(Endpoint.id == bindparam("endpoint_id"))
        .order_by(EndpointSecret.id)
    )


def possible_id(endpoint_id: str) -> bool:
    """Whether ``endpoint_id`` could name an endpoint: ids are short and ASCII. Any other
    path (a NUL in it, which PostgreSQL refuses in a query) is unknown without a query."""
    return endpoint_id.isascii() and len(endpoint_id) <= ID_LENGTH and "\x00" not in endpoint_id


def active_endpoint(connection: Connection, endpoint_id: str, *, box: SecretBox) -> ActiveEndpoint:
    """The enabled endpoint and its decrypted secrets, for one ingest request: one query."""
    rows = connection.execute(_active_endpoint_query(), {"endpoint_id": endpoint_id}).all()
    if not rows or not rows[0].enabled:
        raise NotFound("unknown or disabled endpoint", reason="unknown_endpoint")
    try:
        secrets = [box.decrypt(row.ciphertext) for row in rows if row.ciphertext is not None]
    except ValueError as exc:
        raise SecretUnavailable(str(exc)) from exc
    secret_ids = ",".join(str(row.id) for row in rows if row.id is not None)
    try:
        options = decrypt_options(rows[0].options, box)
    except ValueError as exc:
        raise SecretUnavailable(str(exc)) from exc
    first = rows[0]
    return ActiveEndpoint(
        endpoint_id,
        first.provider,
        secrets,
        secret_ids,
        options,
        ordering=OrderingSettings(
            first.ordering, first.ordering_dead, first.hold_seconds, first.ordering_key_path
        ),
        revision=first.revision,
    )


def endpoint_url(public_url: str, endpoint: Endpoint) -> str:
    return f"{public_url.rstrip('/')}/hooks/{endpoint.id}"


def record_refusal(
    connection: Connection,
    endpoint_id: str,
    reason: str,
    *,
    now: datetime,
    count: int = 1,
    first_at: datetime | None = None,
) -> None:
    """Count ``count`` refused deliveries, the first at ``first_at`` (default ``now``) and
    the last at ``now``: one statement, an upsert. Web processes write their counts in
    batches, in any order, so the times only ever widen."""
    dialect = connection.dialect.name
    module: Any = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(Refusal).values(
        endpoint_id=endpoint_id,
        reason=reason,
        count=count,
        first_at=first_at or now,
        last_at=now,
    )
    new = statement.excluded
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["endpoint_id", "reason"],
            set_={
                "count": Refusal.count + new.count,
                "first_at": case(
                    (new.first_at < Refusal.first_at, new.first_at), else_=Refusal.first_at
                ),
                "last_at": case(
                    (new.last_at > Refusal.last_at, new.last_at), else_=Refusal.last_at
                ),
            },
        )
    )


def refusal_counts(session: Session, endpoint_id: str) -> list[dict[str, Any]]:
    rows = session.scalars(
        select(Refusal).where(Refusal.endpoint_id == endpoint_id).order_by(Refusal.reason)
    ).all()
    return [
        {
            "reason": r.reason,
            "count": r.count,
            "first_at": r.first_at.isoformat(),
            "last_at": r.last_at.isoformat(),
        }
        for r in rows
    ]
