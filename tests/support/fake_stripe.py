"""A local server that answers as Stripe's API does, for the parts hooklatch calls: events
(GET /v1/events, /v1/events/{id}) and webhook endpoints (/v1/webhook_endpoints CRUD).

It follows Stripe's OpenAPI description (github.com/stripe/openapi): list objects
``{"object": "list", "data": [...], "has_more": ..., "url": ...}``, newest first, cursors
``starting_after`` / ``ending_before`` placed by the cursor object, ``limit`` 1 to 100,
``created[gt|gte|lt|lte]``, ``type`` / ``types``, unknown parameters refused, Bearer or
Basic authentication with the key, errors in Stripe's shape. Events older than 30 days
exist but are never answered. It also plays Stripe's side of a delivery: ``deliver`` sends
an event signed as Stripe signs it, and an event that some endpoint it was for has not
answered 2xx is listed under ``delivery_success=false``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

import requests
import stripe

from tests.support.fake_stripe_account import API_VERSION, Account, new_id
from tests.support.fake_stripe_params import ApiError, key_of, masked, nested
from tests.support.local_http import Answer, Incoming, LocalServer

ACCOUNT = "acct_1FakeStripe0000"
# A restricted key's permissions (``add_key(permissions=...)``); writing includes reading.
EVENTS_READ = "events:read"
ENDPOINTS_READ = "webhook_endpoints:read"
ENDPOINTS_WRITE = "webhook_endpoints:write"


class Request(NamedTuple):
    """One request the fake answered, its parameters flat as sent (``created[gte]``)."""

    method: str
    path: str
    params: dict[str, str]


class Attempt(NamedTuple):
    """One delivery the fake made; ``status`` 0: no answer at all."""

    event_id: str
    endpoint_id: str
    status: int
    at: int


@dataclass
class _Fault:
    status: int
    times: int
    retry_after: float | None
    path_prefix: str
    body: bytes | None
    # Matching requests answered normally before this fault applies (mid-run).
    after: int = 0


def signature_header(payload: str, secret: str, timestamp: int) -> str:
    """Stripe-Signature made by stripe-python: its own helper where the release has one,
    else the HMAC its verifier checks."""
    helper = getattr(stripe.WebhookSignature, "generate_signature_header", None)
    if helper is not None:
        return str(helper(payload, secret, timestamp))
    signed = stripe.WebhookSignature._compute_signature(f"{timestamp}.{payload}", secret)
    return f"t={timestamp},v1={signed}"


class FakeStripe(LocalServer):
    """Stripe's API on 127.0.0.1, serving once made: ``with FakeStripe() as fake:``, then
    ``Place(api_url=fake.url)``. A key answers once added (``add_key``)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, frozenset[str] | None] = {}
        self._account = Account(self.now)
        self._faults: list[_Fault] = []
        self.requests: list[Request] = []
        self.attempts: list[Attempt] = []
        # Seconds each API answer takes (a slow provider, so a test can act mid-run).
        self.delay = 0.0
        super().__init__(self._serve)

    def now(self) -> int:
        return int(self._clock())

    # Keys.
    def add_key(self, key: str, *, permissions: Collection[str] | None = None) -> None:
        """A key that answers: a secret key (every permission), or a restricted key with
        ``permissions`` (EVENTS_READ, ENDPOINTS_READ, ENDPOINTS_WRITE) that answers 403
        to the rest."""
        with self._lock:
            self._keys[key] = None if permissions is None else frozenset(permissions)

    def revoke(self, key: str) -> None:
        """The key answers 401 from now on."""
        with self._lock:
            self._keys.pop(key, None)

    # Events.
    def create_event(
        self, type: str, obj: Mapping[str, object], created: int | datetime | None = None
    ) -> dict[str, object]:
        """A new event about ``obj`` (its ``data.object``), for every enabled endpoint
        listening for ``type``; returned as GET /v1/events/{id} answers it."""
        when = self.now() if created is None else created
        stamp = int(when.timestamp()) if isinstance(when, datetime) else int(when)
        with self._lock:
            return self._account.render(self._account.add_event(type, obj, stamp))

    def event(self, event_id: str) -> dict[str, object]:
        with self._lock:
            return self._account.render(self._account.events[event_id])

    def delivery_success(self, event_id: str) -> bool:
        """Whether GET /v1/events lists the event under delivery_success=true."""
        with self._lock:
            return not self._account.pending(self._account.events[event_id])

    def deliver(
        self, event_id: str, endpoint_id: str, *, secret: str | None = None, timeout: float = 10
    ) -> int:
        """POST the event to the endpoint's url, signed as Stripe signs it with the
        endpoint's secret (or ``secret``, to sign it wrong); the attempt is recorded and its
        HTTP status returned (0: no answer). A 2xx delivers it to that endpoint."""
        with self._lock:
            event = self._account.events[event_id]
            payload = json.dumps(self._account.render(event), indent=2)
            url = str(self._account.endpoints[endpoint_id]["url"])
            key = secret or self._account.secrets[endpoint_id]
        stamp = self.now()
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
            "Stripe-Signature": signature_header(payload, key, stamp),
        }
        try:
            status = requests.post(
                url, data=payload.encode(), headers=headers, timeout=timeout
            ).status_code
        except requests.RequestException:
            status = 0
        with self._lock:
            self._account.attempted(event, endpoint_id, status)
            self.attempts.append(Attempt(event_id, endpoint_id, status, stamp))
        return status

    # Webhook endpoints as the dashboard changes them (the API's answers, with no request).
    def create_endpoint(
        self, url: str, enabled_events: Collection[str] = ("*",), *, description: str = ""
    ) -> dict[str, object]:
        """A new webhook endpoint, as POST /v1/webhook_endpoints answers (with its secret)."""
        with self._lock:
            return self._account.create_endpoint(
                {"url": url, "enabled_events": list(enabled_events), "description": description}
            )

    def update_endpoint(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        enabled_events: Collection[str] | None = None,
        disabled: bool | None = None,
    ) -> dict[str, object]:
        """Change it as POST /v1/webhook_endpoints/{id} does (Stripe itself disables an
        endpoint whose deliveries keep failing)."""
        changes: dict[str, object] = {
            "url": url,
            "enabled_events": None if enabled_events is None else list(enabled_events),
            "disabled": None if disabled is None else str(disabled).lower(),
        }
        with self._lock:
            return self._account.update_endpoint(endpoint_id, changes)

    def delete_endpoint(self, endpoint_id: str) -> None:
        with self._lock:
            self._account.delete_endpoint(endpoint_id)

    def endpoint(self, endpoint_id: str) -> dict[str, object]:
        """The endpoint as GET /v1/webhook_endpoints/{id} answers; KeyError once deleted."""
        with self._lock:
            return dict(self._account.endpoints[endpoint_id])

    def secret_of(self, endpoint_id: str) -> str:
        with self._lock:
            return self._account.secrets[endpoint_id]

    # Faults.
    def script(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        path_prefix: str = "/v1/events",
        body: bytes | None = None,
        after: int = 0,
    ) -> None:
        """The next ``times`` requests whose path starts with ``path_prefix`` are answered
        ``status`` in Stripe's error shape for it (429 rate_limit, 500 api_error, 401 the
        key refused, 403 a permission missing, ...), or with ``body`` as it is; then normal
        answers resume. ``retry_after`` adds a Retry-After header; ``after`` lets that many
        matching requests be answered first (a fault in the middle of a run). Faults are
        used in the order scripted."""
        with self._lock:
            self._faults.append(_Fault(status, times, retry_after, path_prefix, body, after))

    # The API.
    def _serve(self, incoming: Incoming) -> Answer:
        if self.delay:
            time.sleep(self.delay)
        target = urlsplit(incoming.target)
        pairs = parse_qsl(target.query, keep_blank_values=True)
        pairs += parse_qsl(incoming.body.decode("utf-8", "replace"), keep_blank_values=True)
        status, headers, body = self._answer(
            incoming.method, target.path, incoming.headers.get("authorization"), pairs
        )
        common = {
            "Content-Type": "application/json",
            "Request-Id": new_id("req_", 14),
            "Stripe-Version": API_VERSION,
        }
        return Answer(status, body, {**common, **headers})

    def _answer(
        self, method: str, path: str, authorization: str | None, pairs: list[tuple[str, str]]
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request."""
        with self._lock:
            self.requests.append(Request(method, path, dict(pairs)))
            key = key_of(authorization)
            fault = next(
                (f for f in self._faults if f.times > 0 and path.startswith(f.path_prefix)), None
            )
            if fault is not None and fault.after > 0:
                fault.after -= 1
            elif fault is not None:
                fault.times -= 1
                return self._faulted(fault, key)
            try:
                self._authenticate(key, method, path)
                return (
                    200,
                    {},
                    json.dumps(self._account.route(method, path, nested(pairs))).encode(),
                )
            except ApiError as error:
                return error.status, error.headers, error.body()

    def _faulted(self, fault: _Fault, key: str | None) -> tuple[int, dict[str, str], bytes]:
        error = ApiError.for_status(fault.status, masked(key or ""), ACCOUNT)
        headers = error.headers
        if fault.retry_after is not None:
            headers["Retry-After"] = f"{fault.retry_after:g}"
        return fault.status, headers, error.body() if fault.body is None else fault.body

    def _authenticate(self, key: str | None, method: str, path: str) -> None:
        if key is None:
            raise ApiError(
                401,
                "You did not provide an API key. You need to provide your API key in the "
                "Authorization header, using Bearer auth (e.g. 'Authorization: Bearer "
                "YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for "
                "details, or we can help at https://support.stripe.com/.",
            )
        if key not in self._keys:
            raise ApiError.for_status(401, masked(key), ACCOUNT)
        granted = self._keys[key]
        if path.startswith("/v1/events"):
            needs = {EVENTS_READ}
        elif method == "GET":
            needs = {ENDPOINTS_READ, ENDPOINTS_WRITE}
        else:
            needs = {ENDPOINTS_WRITE}
        if granted is not None and not needs & granted:
            raise ApiError.for_status(403, masked(key), ACCOUNT)
