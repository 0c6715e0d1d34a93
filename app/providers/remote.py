"""The provider's side of an endpoint, reached through its API (docs/reconciliation.md).

A provider that offers it returns a ``RemoteAPI`` from ``Provider.remote(credentials,
place)``. hooklatch uses it for two things:

- **registering** the endpoint's URL with the provider (``register``), reading back
  what the provider holds for it (``describe``), and removing it (``unregister``);
- **reconciling**: recovering the events the provider never delivered, in one of two
  families. *push*: the provider is asked to send a delivery again (``attempts_page``,
  ``redeliver``), and the redelivery arrives as a normal signed request. *pull*: the
  events are fetched over the authenticated API (``events_page``) and stored as the
  deliveries would have been, under the same unique key.

What is hard to get right lives in hooklatch, not in the plugin: the cursor and its
overlap, the provider's horizon, the budget of requests, waiting out rate limits,
grouping a push provider's attempts by delivery id, storing pulled events oldest first.
A ``RemoteAPI`` makes one HTTP request per call and says what it got.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Generic, TypeVar

PUSH = "push"  # the provider is asked to deliver again
PULL = "pull"  # the event is fetched from the provider's API

# RemoteError.reason
UNAUTHORIZED = "unauthorized"  # 401: the credential is wrong, expired or revoked
FORBIDDEN = "forbidden"  # 403 (not a rate limit): the credential lacks a scope
NOT_FOUND = "not_found"  # 404: the hook or the account is gone, or the credential may not see it
RATE_LIMITED = "rate_limited"  # 429, or GitHub's 403 with a rate-limit answer
SERVER_ERROR = "server_error"  # 5xx
UNREACHABLE = "unreachable"  # no answer: DNS, refused, timeout
BAD_ANSWER = "bad_answer"  # an answer that does not follow the API's description
INVALID = "invalid"  # 400/422: the provider refused what was asked (a bad event type)
REASONS = (
    UNAUTHORIZED,
    FORBIDDEN,
    NOT_FOUND,
    RATE_LIMITED,
    SERVER_ERROR,
    UNREACHABLE,
    BAD_ANSWER,
    INVALID,
)


class RemoteError(Exception):
    """An API call that failed. The message is the provider's own words where it gave
    some, never a credential; ``reason`` is one of REASONS."""

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status
        # Seconds the provider asked to wait (Retry-After, or until a rate limit resets).
        self.retry_after = retry_after


@dataclass(frozen=True)
class Place:
    """Where the endpoint's counterpart lives at the provider, as stored with it."""

    # The API's base URL; None for the provider's public API. GitHub Enterprise Server
    # (https://HOST/api/v3) and the local API servers of the tests set it.
    api_url: str | None = None
    # The owner of the hook where the credential alone does not say: GitHub's
    # "repos/OWNER/NAME" or "orgs/ORG". None for Stripe (the key's account).
    scope: str | None = None
    # The provider's id of the webhook: Stripe's "we_...", GitHub's hook id. None until
    # it is registered or linked.
    hook_id: str | None = None


@dataclass(frozen=True)
class Registration:
    """What the provider holds for an endpoint."""

    hook_id: str
    url: str
    event_types: tuple[str, ...]
    enabled: bool
    # The signing secret, where the provider makes it and returns it at creation
    # (Stripe); never kept in this object after it is stored.
    secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Quota:
    """What a rate-limited API said of its remaining quota, where it says (GitHub's
    x-ratelimit-remaining and x-ratelimit-reset)."""

    remaining: int | None = None
    reset_at: datetime | None = None


@dataclass(frozen=True)
class PulledEvent:
    """One event as the provider's API returned it (pull family)."""

    # The event as the webhook would have carried it (Stripe: the Event object as JSON):
    # ``Provider.parse`` reads its id, type and time from it as from a delivery.
    body: bytes
    # The provider's creation time: pulled events are stored oldest first by it.
    created: datetime
    # The event's id, for counting and logs (parse gives the stored one).
    external_id: str
    # Headers as the delivery would have carried them, where ``parse`` reads the id or
    # type from one (lower-case names); none for Stripe, whose body holds both.
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """One delivery attempt in a push provider's history."""

    # What the redelivery carries and hooklatch stores the event under (GitHub's
    # X-GitHub-Delivery guid): attempts are grouped by it.
    delivery_id: str
    # The id that ``redeliver`` takes (GitHub's delivery id of this attempt).
    attempt_id: str
    at: datetime
    succeeded: bool
    event_type: str = ""


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One answer of a list call: its items, the token of the next page (None at the
    end), and the quota left."""

    items: Sequence[T]
    next_token: str | None
    quota: Quota = Quota()


class RemoteAPI:
    """One endpoint's counterpart at the provider, through its API. Each call makes one
    request (``describe`` and ``register`` may make two) and raises RemoteError."""

    family: ClassVar[str] = PULL  # PUSH or PULL
    # How far back the API reaches: nothing older is asked for (Stripe: 30 days of
    # events; GitHub: 3 days of deliveries, 7 on Enterprise Server).
    horizon: ClassVar[timedelta] = timedelta(days=3)
    # Items per page asked for (the API's largest).
    page_size: ClassVar[int] = 100

    # Registration.
    def register(self, *, url: str, event_types: Sequence[str], secret: str | None) -> Registration:
        """Create the webhook at the provider. ``secret`` is given where hooklatch makes
        it (GitHub); the provider's own is returned where it makes it (Stripe)."""
        raise NotImplementedError

    def describe(self) -> Registration:
        """What the provider holds for ``place.hook_id`` now; NOT_FOUND when it is gone."""
        raise NotImplementedError

    def unregister(self) -> None:
        """Delete the webhook at the provider (NOT_FOUND when it is gone already)."""
        raise NotImplementedError

    # Pull.
    def events_page(
        self,
        *,
        since: datetime,
        only_failed: bool,
        token: str | None,
        types: Sequence[str] | None = None,
    ) -> Page[PulledEvent]:
        """Events created at or after ``since``, newest first, one page; with
        ``only_failed``, those whose delivery has not succeeded. ``types`` names the event
        types the endpoint's webhook receives (None: every type): an API that can filter
        by type should, to spend fewer pages; hooklatch drops other types either way."""
        raise NotImplementedError

    # Push.
    def attempts_page(self, *, token: str | None) -> Page[Attempt]:
        """One page of the hook's delivery attempts, newest first."""
        raise NotImplementedError

    def redeliver(self, attempt_id: str) -> None:
        """Ask the provider to send this attempt's delivery again. INVALID (a 4xx) where
        it refuses that delivery alone (GitHub's 422): the run passes over it and goes on;
        any other error stops the run, NOT_FOUND too (GitHub answers 404 for a token
        without access as for a hook gone)."""
        raise NotImplementedError


def credential_text(values: Mapping[str, str]) -> str:
    """How a credential is named in messages: its field names, never a value."""
    return "credential (" + ", ".join(sorted(values)) + ")"
