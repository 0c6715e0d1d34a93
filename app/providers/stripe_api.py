"""Stripe's API for one endpoint (docs/reconciliation.md): its webhook endpoint, created,
read back and deleted, and its account's events, listed to recover those never delivered.

Built on stripe-python's ``StripeClient`` (12.5 and later), one HTTP request per call: the
SDK's own retries are off, since hooklatch counts and paces the requests.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, ClassVar, TypeVar

import stripe

from hooklatch.providers.parsing import unix_time
from hooklatch.providers.remote import (
    BAD_ANSWER,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    PULL,
    RATE_LIMITED,
    SERVER_ERROR,
    UNAUTHORIZED,
    UNREACHABLE,
    Page,
    Place,
    PulledEvent,
    Registration,
    RemoteAPI,
    RemoteError,
)

if TYPE_CHECKING:
    from stripe.params import EventListParams

# Stripe answers a page of events within seconds; the SDK's default of 80 s would hold a
# run (and its endpoint's lock) far longer than any answer worth waiting for.
TIMEOUT = 30.0
# What the webhook endpoint says it is for, in Stripe's dashboard.
DESCRIPTION = "hooklatch"
# Stripe's credentials as its messages write them ("Invalid API Key provided:
# rk_test_****1234"): secret, restricted and publishable keys and signing secrets, and any
# masked value. Each is blotted out whole, the masked tail with it.
KEY_LIKE = re.compile(r"\b(?:sk|rk|pk|whsec)_[^\s'\"]*|[^\s'\"]*\*{3,}[^\s'\"]*")
REDACTED = "[redacted]"
# GET /v1/events takes at most this many names in `types`.
MAX_TYPES = 20

T = TypeVar("T")


def redact(text: str, key: str = "") -> str:
    """``text`` without ``key`` and without anything that looks like a Stripe credential."""
    if key:
        text = text.replace(key, REDACTED)
    return KEY_LIKE.sub(REDACTED, text)


class RedactKeys(logging.Filter):
    """stripe-python logs Stripe's error messages at INFO (a key's last characters among
    them) and the answers' bodies at DEBUG (a new endpoint's signing secret): its records
    leave with every credential blotted out."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True


def redact_sdk_logs() -> None:
    """Put RedactKeys on stripe-python's logger, once per process."""
    logger = logging.getLogger("stripe")
    if not any(isinstance(existing, RedactKeys) for existing in logger.filters):
        logger.addFilter(RedactKeys())


class StripeAPI(RemoteAPI):
    """One endpoint's webhook endpoint and its account's events, with a restricted key
    (``rk_...``) that can read Events and write Webhook Endpoints."""

    family = PULL
    # GET /v1/events goes back 30 days.
    horizon: ClassVar[timedelta] = timedelta(days=30)
    page_size: ClassVar[int] = 100  # the largest `limit` Stripe takes

    def __init__(self, api_key: str, place: Place, *, timeout: float = TIMEOUT) -> None:
        redact_sdk_logs()
        self._key = api_key
        self.place = place
        self._client = stripe.StripeClient(
            api_key,
            # Stripe's own API unless the place names another (a local server in tests).
            base_addresses={"api": place.api_url.rstrip("/")} if place.api_url else {},
            max_network_retries=0,
            http_client=stripe.RequestsClient(timeout=timeout),
        )

    def events_page(
        self,
        *,
        since: datetime,
        only_failed: bool,
        token: str | None,
        types: Sequence[str] | None = None,
    ) -> Page[PulledEvent]:
        """One page of events created at or after ``since``, newest first as Stripe lists
        them; with ``only_failed``, those Stripe has not delivered to every endpoint (of
        the account: another endpoint's failures are listed too). Of ``types`` only,
        where Stripe can filter by them (at most 20)."""
        params: EventListParams = {
            "created": {"gte": int(since.timestamp())},
            "limit": self.page_size,
        }
        if only_failed:
            params["delivery_success"] = False
        if types and len(types) <= MAX_TYPES:
            params["types"] = list(types)
        if token is not None:
            params["starting_after"] = token
        answer = self._call(lambda: self._client.v1.events.list(params))
        listed, status = _raw(answer.last_response)
        events, has_more = listed.get("data"), listed.get("has_more")
        if not isinstance(events, list) or not isinstance(has_more, bool):
            raise _bad_answer("a list of events without data or has_more", status)
        items = [_pulled(event, status) for event in events]
        if has_more and not items:
            raise _bad_answer("an empty page of events that says more follow", status)
        return Page(items=items, next_token=items[-1].external_id if has_more else None)

    def register(
        self, *, url: str, event_types: Sequence[str], secret: str | None = None
    ) -> Registration:
        """Create a webhook endpoint for ``event_types`` (every type where none are given).
        Stripe makes the signing secret and returns it this once."""
        if secret is not None:
            raise ValueError("Stripe makes the signing secret itself: none can be given")
        answer = self._call(
            lambda: self._client.v1.webhook_endpoints.create(
                {
                    "url": url,
                    # The SDK's types list the event names of its release; Stripe itself
                    # judges a name (INVALID), newer ones included.
                    "enabled_events": list(event_types) or ["*"],  # type: ignore[arg-type]
                    "description": DESCRIPTION,
                }
            )
        )
        endpoint, status = _raw(answer.last_response)
        registration = _registration(endpoint, status)
        if not registration.secret:
            raise _bad_answer("a new webhook endpoint without its secret", status)
        return registration

    def describe(self) -> Registration:
        """What Stripe holds for the endpoint's webhook endpoint now."""
        hook_id = self._hook_id()
        answer = self._call(lambda: self._client.v1.webhook_endpoints.retrieve(hook_id))
        return _registration(*_raw(answer.last_response))

    def unregister(self) -> None:
        hook_id = self._hook_id()
        self._call(lambda: self._client.v1.webhook_endpoints.delete(hook_id))

    def _hook_id(self) -> str:
        if self.place.hook_id is None:
            raise RemoteError("no webhook endpoint is registered at Stripe", reason=NOT_FOUND)
        return self.place.hook_id

    def _call(self, request: Callable[[], T]) -> T:
        """The SDK's answer to one request, or RemoteError."""
        try:
            return request()
        except stripe.StripeError as exc:
            error = _remote_error(exc, self._key)
        # Raised outside the except block: the SDK's exception, whose body can name the key's
        # last characters, is neither the cause nor the context, and no traceback shows it.
        raise error


def _bad_answer(what: str, status: int | None) -> RemoteError:
    return RemoteError(f"Stripe answered {what}", reason=BAD_ANSWER, status=status)


def _raw(response: stripe.StripeResponse | None) -> tuple[dict[str, object], int | None]:
    """The answer's JSON object as Stripe sent it (not the SDK's objects made of it), and
    its HTTP status."""
    data, status = (None, None) if response is None else (response.data, response.code)
    if not isinstance(data, dict):
        raise _bad_answer("something other than a JSON object", status)
    return data, status


def _pulled(event: object, status: int | None) -> PulledEvent:
    """An event of a list, as the webhook would have carried it."""
    if not isinstance(event, dict):
        raise _bad_answer("a list of events holding something other than an event", status)
    event_id, created = event.get("id"), unix_time(event.get("created"))
    if not isinstance(event_id, str) or not event_id or created is None:
        raise _bad_answer("an event without an id or a creation time", status)
    body = json.dumps(event, ensure_ascii=False).encode()
    return PulledEvent(body=body, created=created, external_id=event_id)


def _registration(endpoint: dict[str, object], http_status: int | None) -> Registration:
    """A webhook_endpoint object as a Registration."""
    hook_id, url, status = endpoint.get("id"), endpoint.get("url"), endpoint.get("status")
    types, secret = endpoint.get("enabled_events"), endpoint.get("secret")
    if not (
        isinstance(hook_id, str)
        and isinstance(url, str)
        and status in ("enabled", "disabled")
        and isinstance(types, list)
        and all(isinstance(name, str) for name in types)
        and isinstance(secret, str | None)
    ):
        raise _bad_answer(
            "a webhook endpoint without its id, url, status or enabled_events", http_status
        )
    return Registration(
        hook_id=hook_id,
        url=url,
        event_types=tuple(str(name) for name in types),
        enabled=status == "enabled",
        secret=secret,
    )


def _remote_error(exc: stripe.StripeError, key: str) -> RemoteError:
    """The SDK's exception as RemoteError: Stripe's own message, without any credential."""
    message = redact(exc.user_message or type(exc).__name__, key)
    return RemoteError(
        message,
        reason=_reason(exc),
        status=exc.http_status,
        retry_after=_retry_after(exc.headers or {}),
    )


def _reason(exc: stripe.StripeError) -> str:
    status = exc.http_status
    if isinstance(exc, stripe.APIConnectionError):
        return UNREACHABLE
    # stripe-python takes Stripe's older rate-limit answer (a 400 coded rate_limit) as one.
    if isinstance(exc, stripe.RateLimitError) or status == 429:
        return RATE_LIMITED
    if isinstance(exc, stripe.AuthenticationError) or status == 401:
        return UNAUTHORIZED
    if isinstance(exc, stripe.PermissionError) or status == 403:
        return FORBIDDEN
    if exc.code == "resource_missing" or status == 404:
        return NOT_FOUND
    if status is not None and status >= 500:
        return SERVER_ERROR
    # APIError below 500: an answer the SDK could not read as Stripe's (not JSON, or an
    # error without Stripe's error object).
    if isinstance(exc, stripe.APIError) or status is None or status < 400:
        return BAD_ANSWER
    return INVALID


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Retry-After in seconds, where the answer has one (Stripe writes no HTTP date there)."""
    value = next((text for name, text in headers.items() if name.lower() == "retry-after"), "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if 0 <= seconds < float("inf") else None
