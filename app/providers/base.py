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

A ``Delivery`` carries the method, the public URL the provider called, headers
with lower-case names, the raw body bytes, and the endpoint's options.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Protocol
from urllib.parse import parse_qs, urlsplit

from hooklatch.errors import MalformedRequest, VerificationError, storable

# Reading what a sender wrote (timestamps, times, JSON): importable from here, as plugins
# always have for json_object and occurred_at.
from hooklatch.providers.parsing import NOT_JSON as NOT_JSON
from hooklatch.providers.parsing import json_digest as json_digest
from hooklatch.providers.parsing import json_object as json_object
from hooklatch.providers.parsing import load_json as load_json
from hooklatch.providers.parsing import occurred_at as occurred_at
from hooklatch.providers.parsing import unix_time as unix_time
from hooklatch.providers.parsing import unix_timestamp as unix_timestamp

MAX_KEY_LENGTH = 255  # events.external_id and events.type
FAR_OFF = 2**53


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


class KeyedEvent(Protocol):
    """What ``ordering_key`` and ``ordering_position`` read: the handlers' EventView has it
    all, and so does what ingest builds for an endpoint that orders its events."""

    @property
    def type(self) -> str: ...
    @property
    def payload(self) -> Any: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def occurred_at(self) -> datetime | None: ...


# A key is stored (events.ordering_key) and shown: longer ones are refused as no key.
MAX_ORDERING_KEY_LENGTH = 255


def position_of(moment: datetime | None) -> int | None:
    """A time as an ordering position: microseconds since the epoch, UTC (a naive time is
    taken as UTC). Two events of the same whole second (Stripe's ``created``) are equal."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def dotted(payload: Any, path: str) -> Any:
    """``payload["data"]["object"]["customer"]`` for ``data.object.customer``, or None
    where any step is missing or not an object."""
    value = payload
    for step in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(step)
    return value


def key_text(value: Any) -> str | None:
    """An id from a payload as a key: text or an integer (Shopify's ids are numbers);
    anything else, empty, or too long to store, is no key.

    An integer is its digits (4711), and text is itself (cus_123), except text that reads
    as another JSON value (a number, true, false, null or a quoted string), which is
    written as a JSON string: the text "1" is the key ``"1"``, the number 1 the key
    ``1``, so that two entities never share one key."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, int):
        if not -(10**MAX_ORDERING_KEY_LENGTH) < value < 10**MAX_ORDERING_KEY_LENGTH:
            return None  # too long to store, and str() refuses integers past 4,300 digits
        return str(value)
    if len(value) > MAX_ORDERING_KEY_LENGTH:
        return None
    text = json.dumps(value, ensure_ascii=False) if _reads_as_json(value) else value
    return stored_key(text)


def stored_key(value: Any) -> str | None:
    """A plugin's ``ordering_key`` as ingest stores it: text as it is (the plugin's own
    ``key_text`` has written it), an integer as ``key_text`` writes it; None for anything
    else, and for empty or too long text, a NUL or a lone surrogate."""
    if not isinstance(value, str):
        return key_text(value)
    if not value or len(value) > MAX_ORDERING_KEY_LENGTH:
        return None
    return value if _storable(value) else None


# The first characters of text that JSON reads as a number, true, false, null or a string
# (with the whitespace JSON allows before them; NaN and Infinity are Python's extensions).
_JSON_SCALAR_STARTS = frozenset('-0123456789"tfnNI \t\n\r')


def _reads_as_json(text: str) -> bool:
    """Whether ``text`` is the JSON of a number, true, false, null or a string."""
    if text[:1] not in _JSON_SCALAR_STARTS:
        return False
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return not isinstance(value, list | dict)


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

    def payload(self, headers: Mapping[str, str], body: bytes) -> Any:
        """The body as handlers see it (``event.payload``); JSON by default."""
        try:
            return json.loads(body)
        except NOT_JSON:
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

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        raise NotImplementedError

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        """A realistic test delivery, unsigned: extra headers and the body."""
        raise NotImplementedError


def require_header(delivery: Delivery, name: str) -> str:
    value = delivery.header(name)
    if not value:
        raise MalformedRequest(f"missing header {name}", reason="missing_header")
    return value


def require_secrets(secrets: Sequence[str]) -> None:
    if not secrets:
        raise VerificationError("the endpoint has no active secret", reason="no_secret")


def hmac_sha256(key: str | bytes, message: bytes) -> bytes:
    """HMAC-SHA256 of ``message``; a text key is its UTF-8 bytes, as every provider here
    keys it (Stripe's ``whsec_`` prefix included)."""
    return hmac.new(key.encode() if isinstance(key, str) else key, message, hashlib.sha256).digest()


def hmac_hex(key: str | bytes, message: bytes) -> str:
    return hmac_sha256(key, message).hex()


def hmac_base64(key: str | bytes, message: bytes) -> str:
    return base64.b64encode(hmac_sha256(key, message)).decode()


def timestamped_signatures(
    header: str, *, name: str, separator: str, timestamp_key: str, signature_key: str
) -> tuple[int, list[str]]:
    """A header of ``key=value`` items that carries one timestamp and one or more
    signatures: Stripe's ``t=<unix>,v1=<hex>,v1=<hex>``, Paddle's ``ts=<unix>;h1=<hex>``.
    Other keys are ignored; no timestamp or no signature is malformed_header."""
    timestamp: int | None = None
    signatures: list[str] = []
    for item in header.split(separator):
        key, _, value = item.strip().partition("=")
        if key == timestamp_key:
            timestamp = unix_timestamp(value)
        elif key == signature_key:
            signatures.append(value)
    if timestamp is None or not signatures:
        raise MalformedRequest(
            f"{name} needs {timestamp_key}=<unix time> and at least one "
            f"{signature_key}=<signature>",
            reason="malformed_header",
        )
    return timestamp, signatures


def any_digest_matches(expected: Sequence[bytes | str], received: Sequence[bytes | str]) -> bool:
    """Compare every pair in constant time, without stopping at the first match."""
    matched = False
    for want in expected:
        for got in received:
            a = want.encode() if isinstance(want, str) else want
            b = got.encode() if isinstance(got, str) else got
            matched |= hmac.compare_digest(a, b)
    return matched


def check_timestamp(timestamp: int, *, now: datetime, tolerance: timedelta) -> None:
    # Held within what a float counts exactly: an integer past any clock is as stale, or
    # as far in the future, as one at the bound, and cannot overflow the subtraction.
    timestamp = max(-FAR_OFF, min(timestamp, FAR_OFF))
    skew = now.timestamp() - timestamp
    facts = {"timestamp_skew_seconds": round(skew, 1)}
    if skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(skew)} s old (tolerance {int(tolerance.total_seconds())} s)",
            reason="stale_timestamp",
            facts=facts,
        )
    if -skew > tolerance.total_seconds():
        raise VerificationError(
            f"timestamp is {int(-skew)} s in the future (tolerance "
            f"{int(tolerance.total_seconds())} s)",
            reason="future_timestamp",
            facts=facts,
        )
