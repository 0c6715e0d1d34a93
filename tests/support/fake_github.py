"""GitHub's REST API for hooks, as a real HTTP server on 127.0.0.1 that follows the
published description (github/rest-api-description, api.github.com.2022-11-28): the
``hook``, ``org-hook`` and ``hook-delivery-item`` objects, the deliveries list paged by
``cursor`` with a Link header, the 202 of a redelivery, errors as ``basic-error``
({"message", "documentation_url", "status"}) and the rate-limit headers on every answer.

What it does as GitHub does:

- tokens (``add_token``, ``revoke``: 401 "Bad credentials") and GitHub Apps
  (``add_app``): the JWT is checked on POST /app/installations/{id}/access_tokens, which
  issues an hour's ``ghs_`` token;
- hooks of ``repos/OWNER/NAME`` and ``orgs/ORG``: create, read, list, PATCH (active,
  config, events: drift), delete;
- deliveries (``deliver``, ``record``): newest first, at most 100 a page, those of the
  last ``horizon`` only (3 days: GitHub Enterprise Server keeps 7); a delivery POSTs to the
  hook's URL as GitHub does, signed with X-Hub-Signature-256 and X-Hub-Signature by
  githubkit's signer (a client hooklatch did not write), through ``send`` (an HTTP POST;
  a test may pass its own, into a Flask test client say);
- POST .../deliveries/{id}/attempts answers 202 and sends the original payload again with
  the same X-GitHub-Delivery, signed afresh with the hook's current secret, to its current
  URL, then records the attempt (``redelivery: true``). By default it sends before it
  answers, so a test sees the redelivery as soon as the call returns; with
  ``background_redelivery=True`` it answers first and sends from a thread, as GitHub does
  (``settle`` waits for those sends).

Faults: ``script`` (the next matching requests, or those after the first few, get a
status: 500, 401, 404, 422, 429, a 403 rate limit with its x-ratelimit-reset), and the
quota itself (``rate_limit`` requests an hour a credential, then 403 "API
rate limit exceeded" with x-ratelimit-remaining: 0). Each request is logged in
``requests``.

Not as GitHub: a new hook gets no ``ping`` unless ``ping_on_create=True`` (a test's hook
URL often has nothing behind it yet); any event name of lower-case letters is accepted.

The routes are in fake_github_routes, the objects and their JSON in fake_github_objects.
"""

from __future__ import annotations

import json
import secrets
import threading
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit

import requests
from githubkit.webhooks import sign

from tests.support.fake_github_objects import Delivery, Hook, Logged, Script, status_text
from tests.support.fake_github_routes import Routes
from tests.support.local_http import Answer, Incoming, LocalServer

HORIZON = timedelta(days=3)
RATE_LIMIT = 5000
TOKEN_LIFE = timedelta(hours=1)
HOOKSHOT = "GitHub-Hookshot/2e6bd4e"
TARGET_TYPES = {"repos": "repository", "orgs": "organization"}
# GitHub waits 10 s for a receiver's answer.
PATIENCE = 10.0

Clock = Callable[[], datetime]
# Sends one delivery: (url, headers, body) -> the answer's status. Raises TimeoutError
# where no answer came in time, OSError (requests' ConnectionError is one) where none came.
Sender = Callable[[str, Mapping[str, str], bytes], int]


def utc_now() -> datetime:
    return datetime.now(UTC)


def http_send(url: str, headers: Mapping[str, str], body: bytes) -> int:
    try:
        answer = requests.post(
            url, data=body, headers=dict(headers), timeout=PATIENCE, allow_redirects=False
        )
    except requests.Timeout as exc:
        raise TimeoutError(f"no answer within {PATIENCE} s") from exc
    return answer.status_code


class FakeGitHub(LocalServer):
    """See the module's docstring. ``url`` is the API's base (Place.api_url)."""

    def __init__(
        self,
        *,
        clock: Clock = utc_now,
        horizon: timedelta = HORIZON,
        rate_limit: int = RATE_LIMIT,
        send: Sender = http_send,
        background_redelivery: bool = False,
        ping_on_create: bool = False,
    ) -> None:
        self.clock = clock
        self.horizon = horizon
        self.rate_limit = rate_limit
        self.send = send
        self.background_redelivery = background_redelivery
        self.ping_on_create = ping_on_create
        self.requests: list[Logged] = []
        self.tokens: dict[str, tuple[bool, datetime | None]] = {}  # -> can write, expires
        self.apps: dict[str, tuple[str, str]] = {}  # app id -> public key PEM, installation
        self.hooks: dict[int, Hook] = {}
        self._deliveries: dict[int, Delivery] = {}
        self._scripts: list[Script] = []
        self._used: dict[str, int] = {}  # credential -> requests in this hour
        self._window_ends = clock() + timedelta(hours=1)
        self._next_id = {"hook": 500_000_000, "delivery": 10_000_000_000}
        self._targets: dict[str, int] = {}  # scope -> repository or organisation id
        self._sends: list[threading.Thread] = []
        self.lock = threading.RLock()
        self._routes = Routes(self)
        super().__init__(self._answer)

    # Credentials.

    def add_token(self, token: str, *, write: bool = True) -> None:
        """A token that reaches every hook; with ``write=False`` it can only read them
        (403 "Resource not accessible by personal access token" on the rest)."""
        with self.lock:
            self.tokens[token] = (write, None)

    def revoke(self, token: str) -> None:
        """The token (or installation token) answers 401 "Bad credentials" from now on."""
        with self.lock:
            self.tokens.pop(token, None)

    def add_app(
        self, app_id: str | int, public_key_pem: str | bytes, installation_id: int | str
    ) -> None:
        """A GitHub App installed once: a JWT signed by its private key (iss = ``app_id``)
        gets installation tokens for ``installation_id``."""
        pem = public_key_pem.decode() if isinstance(public_key_pem, bytes) else public_key_pem
        with self.lock:
            self.apps[str(app_id)] = (pem, str(installation_id))

    def issue_installation_token(self) -> tuple[str, datetime]:
        token = "ghs_" + secrets.token_hex(18)
        expires = self.clock() + TOKEN_LIFE
        with self.lock:
            self.tokens[token] = (True, expires)
        return token, expires

    # Hooks.

    def add_hook(
        self,
        scope: str,
        url: str,
        *,
        secret: str,
        events: tuple[str, ...] = ("*",),
        active: bool = True,
        content_type: str = "json",
    ) -> int:
        """A hook made without the API (no ping); its id."""
        now = self.clock()
        with self.lock:
            hook_id = self._new_id("hook")
            self.hooks[hook_id] = Hook(
                hook_id, scope, url, secret, list(events), active, content_type, now, now
            )
        return hook_id

    def hook(self, hook_id: int | str) -> Hook:
        with self.lock:
            return self.hooks[int(hook_id)]

    def change_hook(
        self,
        hook_id: int | str,
        *,
        active: bool | None = None,
        url: str | None = None,
        events: list[str] | None = None,
        secret: str | None = None,
    ) -> None:
        """What a PATCH does, without the API: drift made by someone at GitHub."""
        with self.lock:
            hook = self.hooks[int(hook_id)]
            hook.active = hook.active if active is None else active
            hook.url = url or hook.url
            hook.events = hook.events if events is None else list(events)
            hook.secret = hook.secret if secret is None else secret
            hook.updated_at = self.clock()

    def delete_hook(self, hook_id: int | str) -> None:
        with self.lock:
            self.hooks.pop(int(hook_id), None)

    def target_id(self, scope: str) -> int:
        """The repository's or organisation's id (a delivery's repository_id)."""
        with self.lock:
            return self._targets.setdefault(scope, 1_000 + len(self._targets))

    # Deliveries.

    def deliver(self, hook_id: int | str, event: str, payload: dict, *, fail: bool = False) -> str:
        """An event GitHub delivers to the hook: POSTed to its URL (unless ``fail``: then
        recorded as GitHub records a receiver's 502, without reaching it) and recorded
        with the answer's status. Its X-GitHub-Delivery guid. A hook that is not active
        gets nothing, as at GitHub: the guid is not recorded."""
        guid = str(uuid.uuid4())
        body = json.dumps(payload).encode()
        hook = self.hook(hook_id)
        if not hook.active:
            return guid
        if fail:
            self.record(hook.id, guid, event, payload, 502, self.clock())
        else:
            self.send_delivery(hook, guid, event, body, redelivery=False)
        return guid

    def record(
        self,
        hook_id: int | str,
        guid: str,
        event: str,
        payload: dict | bytes,
        status_code: int,
        delivered_at: datetime,
        redelivery: bool = False,
        *,
        status: str | None = None,
        duration: float = 0.0,
    ) -> int:
        """An attempt in the hook's history, sent to nobody (history made in bulk, at
        given times); its id, which a redelivery takes. ``status`` is GitHub's text for
        the outcome (by default "OK" or "Invalid HTTP Response: {status_code}")."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        with self.lock:
            hook = self.hooks.get(int(hook_id))
            on_repository = hook is not None and hook.scope.startswith("repos/")
            delivery = Delivery(
                id=self._new_id("delivery"),
                hook_id=int(hook_id),
                guid=guid,
                event=event,
                payload=body,
                delivered_at=delivered_at,
                status_code=status_code,
                status=status or status_text(status_code),
                redelivery=redelivery,
                duration=duration,
                repository_id=self.target_id(hook.scope) if hook and on_repository else None,
            )
            self._deliveries[delivery.id] = delivery
            self._note_response(delivery)
        return delivery.id

    def deliveries(self, hook_id: int | str) -> list[Delivery]:
        """Every attempt of the hook, newest first, however old."""
        with self.lock:
            found = [d for d in self._deliveries.values() if d.hook_id == int(hook_id)]
        return sorted(found, key=lambda d: (d.delivered_at, d.id), reverse=True)

    def delivery(self, delivery_id: int | str) -> Delivery | None:
        with self.lock:
            return self._deliveries.get(int(delivery_id))

    def redeliveries(self, hook_id: int | str) -> list[Delivery]:
        return [d for d in self.deliveries(hook_id) if d.redelivery]

    def send_delivery(
        self, hook: Hook, guid: str, event: str, payload: bytes, *, redelivery: bool
    ) -> Delivery:
        """POST the payload to the hook's URL as GitHub does, then record the attempt. No
        lock is held while it waits: the receiver may call the API meanwhile."""
        with self.lock:
            url, secret, content_type = hook.url, hook.secret, hook.content_type
        body = payload
        headers = {
            "Content-Type": "application/json",
            "User-Agent": HOOKSHOT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": guid,
            "X-GitHub-Hook-ID": str(hook.id),
            "X-GitHub-Hook-Installation-Target-Type": TARGET_TYPES[hook.scope.split("/")[0]],
            "X-GitHub-Hook-Installation-Target-ID": str(self.target_id(hook.scope)),
        }
        if content_type == "form":
            body = urlencode({"payload": payload.decode()}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if secret:
            headers["X-Hub-Signature"] = sign(secret, body, method="sha1")
            headers["X-Hub-Signature-256"] = sign(secret, body, method="sha256")
        started = self.clock()
        try:
            status_code = self.send(url, headers, body)
        except TimeoutError:
            status_code, status = 0, "timed out"
        except OSError:
            status_code, status = 0, "failed to connect to host"
        else:
            status = status_text(status_code)
        duration = round((self.clock() - started).total_seconds(), 2)
        delivery_id = self.record(
            hook.id,
            guid,
            event,
            payload,
            status_code,
            started,
            redelivery,
            status=status,
            duration=duration,
        )
        return self._deliveries[delivery_id]

    def redeliver(self, delivery: Delivery) -> None:
        """What POST .../attempts does once it has answered 202 (or before)."""
        hook = self.hook(delivery.hook_id)
        resend = (hook, delivery.guid, delivery.event, delivery.payload)
        if not self.background_redelivery:
            self.send_delivery(*resend, redelivery=True)
            return
        thread = threading.Thread(
            target=self.send_delivery, args=resend, kwargs={"redelivery": True}, daemon=True
        )
        with self.lock:
            self._sends.append(thread)
        thread.start()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait for the redeliveries sent in the background."""
        with self.lock:
            sends, self._sends = self._sends, []
        for thread in sends:
            thread.join(timeout)

    # Faults.

    def script(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: int | None = None,
        remaining: int | None = None,
        reset: int | None = None,
        path_contains: str | None = None,
        method: str | None = None,
        message: str | None = None,
        body: bytes | None = None,
        after: int = 0,
    ) -> None:
        """The next ``times`` requests (whose path contains ``path_contains``, of
        ``method``) are answered ``status`` with GitHub's message for it (or ``message``,
        or exactly ``body``); a Retry-After header when ``retry_after`` is given,
        x-ratelimit-remaining ``remaining`` and x-ratelimit-reset ``reset`` (a unix
        time). ``after`` lets that many matching requests be answered first (a fault in
        the middle of a run). Normal answers resume after."""
        with self.lock:
            self._scripts.append(
                Script(
                    status,
                    times,
                    retry_after,
                    remaining,
                    path_contains,
                    method,
                    message,
                    body,
                    reset=reset,
                    after=after,
                )
            )

    def _answer(self, incoming: Incoming) -> Answer:
        parts = urlsplit(incoming.target)
        request = Logged(
            incoming.method, parts.path, dict(parse_qsl(parts.query)), incoming.headers
        )
        with self.lock:
            self.requests.append(request)
        return self._routes.answer(request, incoming.body)

    def take_script(self, method: str, path: str) -> Script | None:
        with self.lock:
            for script in self._scripts:
                if (script.method in (None, method)) and (script.path_contains or "") in path:
                    if script.after > 0:
                        script.after -= 1
                        return None
                    script.times -= 1
                    if script.times <= 0:
                        self._scripts.remove(script)
                    return script
        return None

    def count_request(self, credential: str) -> tuple[int, int]:
        """A credential's request counted in this hour's window: (used, reset time)."""
        with self.lock:
            if self.clock() >= self._window_ends:
                self._used.clear()
                self._window_ends = self.clock() + timedelta(hours=1)
            self._used[credential] = self._used.get(credential, 0) + 1
            return self._used[credential], int(self._window_ends.timestamp())

    def _new_id(self, kind: str) -> int:
        self._next_id[kind] += 1
        return self._next_id[kind]

    def _note_response(self, delivery: Delivery) -> None:
        hook = self.hooks.get(delivery.hook_id)
        if hook is not None:
            ok = 200 <= delivery.status_code < 300
            hook.last_response = {
                "code": delivery.status_code,
                "status": "active" if ok else "failed",
                "message": delivery.status,
            }
