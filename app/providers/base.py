"""The provider plugin contract (docs/plugins.md).

A provider is a class registered under the entry-point group
``hooklatch.providers``. hooklatch instantiates it once at start and calls:

- ``verify(delivery, *, secrets, now)``: pure; raises VerificationError
  (or MalformedRequest) with a machine reason, returns None when any of the
  endpoint's active secrets verifies the exact bytes received.
- ``parse(delivery)``: the events in the request (dedupe key, type, time); a
  request may carry several.
- ``handshake(delivery, *, secrets)``: an answer for a registration handshake
  sent as a POST, or None; called only after ``verify`` passed, with the same
  secrets (Zoom answers with an HMAC keyed by the secret that verified).
- ``challenge(delivery, *, secrets)``: an answer to an unsigned GET handshake
  (Meta's ``hub.challenge``), or None (the GET is refused).
- ``sign(delivery, *, secret, now)``: headers that make a valid test delivery.
- ``credential_headers_for(options)``: the headers that carry a credential (a token sent
  as it is), which are never stored with an event.
- ``ordering_key(event)``: the entity an event is about (a customer, an order), or None;
  events of one key can be serialised or ordered (docs/plugins.md, "Ordering keys").
- ``ordering_position(event)``: the provider's time or sequence for that entity, which
  orders a key's events and tells a stale one; by default ``occurred_at``.
- ``remote(credentials, place)``: the provider's API for one endpoint (registering its
  URL, recovering events it never delivered; hooklatch.providers.remote), where
  ``credential_fields`` names what its credential holds.

A ``Delivery`` carries the method, the public URL the provider called, headers
with lower-case names, the raw body bytes, and the endpoint's options.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar
from urllib.parse import parse_qs, urlsplit

from hooklatch.errors import MalformedRequest, storable
from hooklatch.jsontypes import JSON

# What ordering_key and ordering_position read and give.
from hooklatch.providers.keys import MAX_ORDERING_KEY_LENGTH as MAX_ORDERING_KEY_LENGTH
from hooklatch.providers.keys import KeyedEvent as KeyedEvent
from hooklatch.providers.keys import dotted as dotted
from hooklatch.providers.keys import key_text as key_text
from hooklatch.providers.keys import position_of as position_of
from hooklatch.providers.keys import stored_key as stored_key

# Reading what a sender wrote (timestamps, times, JSON) and checking its signature:
# importable from here, as plugins always have.
from hooklatch.providers.parsing import NOT_JSON as NOT_JSON
from hooklatch.providers.parsing import id_and_type as id_and_type
from hooklatch.providers.parsing import json_digest as json_digest
from hooklatch.providers.parsing import json_object as json_object
from hooklatch.providers.parsing import load_json as load_json
from hooklatch.providers.parsing import occurred_at as occurred_at
from hooklatch.providers.parsing import unix_time as unix_time
from hooklatch.providers.parsing import unix_timestamp as unix_timestamp
from hooklatch.providers.remote import Place, RemoteAPI
from hooklatch.providers.signing import any_digest_matches as any_digest_matches
from hooklatch.providers.signing import check_signatures as check_signatures
from hooklatch.providers.signing import check_timestamp as check_timestamp
from hooklatch.providers.signing import hmac_base64 as hmac_base64
from hooklatch.providers.signing import hmac_hex as hmac_hex
from hooklatch.providers.signing import hmac_sha256 as hmac_sha256
from hooklatch.providers.signing import require_secrets as require_secrets
from hooklatch.providers.signing import timestamped_signatures as timestamped_signatures

MAX_KEY_LENGTH = 255  # events.external_id and events.type


@dataclass(frozen=True)
class Delivery:
    """One request as a provider sees it."""

    method: str
    # The URL the provider called, as it called it: HOOKLATCH_PUBLIC_URL plus path and
    # query, so a signature over the URL (Twilio, Square) holds behind a proxy.
    url: str
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    options: Mapping[str, str] = field(default_factory=dict)  # the endpoint's, validated

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    @property
    def query(self) -> dict[str, str]:
        return {key: values[0] for key, values in parse_qs(urlsplit(self.url).query).items()}


@dataclass(frozen=True)
class IncomingEvent:
    """One event of a delivery. Its id and type must be storable as they are, or the
    delivery is malformed_body: the database would refuse them (a 500, or a 503 the
    provider would retry for days).

    ``id_signed`` says whether the signature covers the id: it was read from the signed
    body, or from a header the signature covers (Standard Webhooks' ``webhook-id``). A
    delivery that repeats a stored id with another body is then the provider's own (a
    re-send whose body changed, as Stripe's ``pending_webhooks`` count does), and is a
    duplicate. Where the id is not signed (GitHub's ``X-GitHub-Delivery``), anyone who
    has seen one signed body could send it under the id of an event still to come, so a
    differing body is kept as an event of its own, flagged as a conflict
    (docs/plugins.md, "Event ids"). Unsigned is the default: a plugin that does not say
    can lose no event this way. (A plugin may also set it where an endpoint's options say
    the sender's own retries change the body: generic-hmac's ``retries_change_body``.)
    """

    external_id: str
    type: str
    occurred_at: datetime | None = None
    id_signed: bool = False

    def __post_init__(self) -> None:
        for name, value in (("id", self.external_id), ("type", self.type)):
            if not _storable(value):
                raise MalformedRequest(
                    f"the event's {name} must be text of at most {MAX_KEY_LENGTH} characters, "
                    "without NUL or lone surrogates",
                    reason="malformed_body",
                )


def _storable(value: object) -> bool:
    """Text PostgreSQL can hold in a String(255) column."""
    return isinstance(value, str) and len(value) <= MAX_KEY_LENGTH and storable(value)


@dataclass(frozen=True)
class HandshakeResponse:
    body: bytes
    content_type: str = "application/json"
    status: int = 200


class Provider:
    name: ClassVar[str] = ""
    # How long the provider keeps re-sending one event; dedupe keys must outlive it.
    retry_window: ClassVar[timedelta] = timedelta(days=3)
    # True where the receiver chooses the secret and tells the provider (GitHub).
    generates_secret: ClassVar[bool] = False
    # Largest clock difference accepted, where the provider signs a timestamp.
    tolerance: ClassVar[timedelta] = timedelta(minutes=5)
    # Options an endpoint of this provider may set (`endpoints add --option k=v`):
    # name -> what it means. ``check_options`` validates them.
    options: ClassVar[Mapping[str, str]] = {}
    # Those of the options that are secrets (Meta's verify token): stored encrypted like
    # the endpoint's secrets, never printed.
    secret_options: ClassVar[frozenset[str]] = frozenset()
    # Headers that carry a credential rather than a signature (GitLab's X-Gitlab-Token):
    # whoever reads one can send any body. They are never stored, shown, logged or
    # handed to handlers; ``credential_headers_for`` adds any an endpoint's options name.
    credential_headers: ClassVar[frozenset[str]] = frozenset()
    # The fields of a credential for the provider's API (docs/reconciliation.md): name ->
    # what it holds. Every field is secret: stored encrypted, never shown. Empty where
    # hooklatch cannot reach the provider's API (``remote``).
    credential_fields: ClassVar[Mapping[str, str]] = {}

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        raise NotImplementedError

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        raise NotImplementedError

    def check_options(self, options: Mapping[str, str]) -> dict[str, str]:
        """The options to store for a new endpoint; raise ValueError naming a bad one."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise ValueError(f"{self.name} has no option {unknown[0]!r} (options: {known})")
        return dict(options)

    def credential_headers_for(self, options: Mapping[str, str]) -> frozenset[str]:
        """The lower-case names of the headers that carry a credential in a delivery to an
        endpoint with these options. Override it where an option names such a header."""
        return frozenset(name.lower() for name in self.credential_headers)

    def payload(self, headers: Mapping[str, str], body: bytes) -> JSON:
        """The body as handlers see it (``event.payload``); JSON by default."""
        try:
            return load_json(body)
        except MalformedRequest:
            return None

    def handshake(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        return None

    def ordering_key(self, event: KeyedEvent) -> str | None:
        """The entity this event changes, as text (``key_text``), or None: events without
        a key are never held back or ordered. Pure and cheap: ingest calls it for each
        event of an endpoint whose ordering is ``serial`` or ``fifo``."""
        return None

    def ordering_position(self, event: KeyedEvent) -> int | None:
        """Where this event stands in its entity's history, larger is newer: the provider's
        time in microseconds (``position_of``) or its sequence number. The stale guard and
        the hold window compare it; None compares as unknown (never stale)."""
        return position_of(event.occurred_at)

    def challenge(self, delivery: Delivery, *, secrets: Sequence[str]) -> HandshakeResponse | None:
        return None

    def check_credentials(self, values: Mapping[str, str]) -> dict[str, str]:
        """The credential to store; raise ValueError naming a field that is unknown or
        missing (never a value). By default every field of ``credential_fields``."""
        if not self.credential_fields:
            raise ValueError(f"hooklatch cannot reach {self.name}'s API")
        unknown = sorted(set(values) - set(self.credential_fields))
        if unknown:
            known = ", ".join(sorted(self.credential_fields))
            raise ValueError(f"{self.name} credentials have no field {unknown[0]!r} ({known})")
        missing = sorted(name for name in self.credential_fields if not values.get(name))
        if missing:
            raise ValueError(f"{self.name} credentials need {missing[0]!r}")
        return dict(values)

    def remote(self, credentials: Mapping[str, str], place: Place) -> RemoteAPI:
        """The provider's API for one endpoint, with its stored credential (checked by
        ``check_credentials``) and where its webhook lives. Providers with no
        ``credential_fields`` have none."""
        raise NotImplementedError(f"hooklatch cannot reach {self.name}'s API")

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        raise NotImplementedError

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        """A realistic test delivery, unsigned: extra headers and the body."""
        raise NotImplementedError


def require_header(delivery: Delivery, name: str, *, prefix: str = "") -> str:
    """The header's value; missing_header when it is absent or empty, malformed_header when
    it does not start with ``prefix`` (GitHub's ``sha256=``)."""
    value = delivery.header(name)
    if not value:
        raise MalformedRequest(f"missing header {name}", reason="missing_header")
    if not value.startswith(prefix):
        raise MalformedRequest(f"{name} must start with {prefix}", reason="malformed_header")
    return value
