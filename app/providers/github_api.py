"""GitHub's REST API for one endpoint's hook: registering it, and redelivering what failed.

Plain HTTP over requests rather than a GitHub client. hooklatch needs six routes (a
hook's create, read and delete, its deliveries, a redelivery, and a GitHub App's
installation token), and it must see every request it makes, the cursor in each answer's
Link header and the rate-limit headers of each answer, to keep a run within its budget and
wait out a limit itself. A full client (githubkit, PyGithub) pages, retries and sleeps on
its own, out of the budget's sight, and brings thousands of generated models for six
routes; the answers read here are checked field by field instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import parse_qs, urlsplit

import requests
from requests.auth import AuthBase

from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.github_credentials import app_jwt, check_credentials
from hooklatch.providers.parsing import NOT_JSON, occurred_at, unix_timestamp
from hooklatch.providers.remote import (
    BAD_ANSWER,
    FORBIDDEN,
    INVALID,
    NOT_FOUND,
    PUSH,
    RATE_LIMITED,
    SERVER_ERROR,
    UNAUTHORIZED,
    UNREACHABLE,
    Attempt,
    Page,
    Place,
    Quota,
    Registration,
    RemoteAPI,
    RemoteError,
)

API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
# Seconds to connect and to wait for an answer.
TIMEOUT = (5.0, 30.0)
# An installation token is replaced this long before it expires.
MARGIN = timedelta(minutes=1)
# "repos/OWNER/NAME" or "orgs/ORG": names of letters, digits, "-", "_" and ".".
SCOPE = re.compile(r"(repos/[\w.-]+/[\w.-]+|orgs/[\w.-]+)", re.ASCII)
MESSAGE_LENGTH = 300
# A secondary rate limit may come as a 403 or 429 with neither retry-after nor a spent
# quota, said only in its message; GitHub's docs then say to wait at least a minute.
SECONDARY_LIMIT = "secondary rate limit"
SECONDARY_WAIT = 60.0

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class _Bearer(AuthBase):
    """The Authorization header. Given as ``auth``, it also keeps requests from putting a
    ~/.netrc password in its place."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request


class GitHubAPI(RemoteAPI):
    """A repository's or organisation's hook on github.com. Each call makes one request,
    and one more first for a GitHub App whose installation token is missing or expiring."""

    family = PUSH
    # GitHub lists, and redelivers, the deliveries of the last 3 days.
    horizon = timedelta(days=3)
    page_size = 100

    def __init__(
        self,
        credentials: Mapping[str, str],
        place: Place,
        *,
        clock: Clock = utc_now,
        timeout: tuple[float, float] = TIMEOUT,
    ) -> None:
        self._credentials = check_credentials(credentials)
        self._base = _base_url(place.api_url)
        self._hooks = f"/{_scope(place.scope)}/hooks"
        self._hook_id = place.hook_id
        if self._hook_id is not None and not _number(self._hook_id):
            raise ValueError("a GitHub hook id is a number")
        self._clock = clock
        self._timeout = timeout
        self._installation: tuple[str, datetime] | None = None  # token, expires at
        self._session = requests.Session()
        self._session.headers.update(
            {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": _user_agent(),
            }
        )

    def register(self, *, url: str, event_types: Sequence[str], secret: str | None) -> Registration:
        if not secret:
            raise ValueError("a GitHub hook needs the secret hooklatch made for it")
        body: JSONObject = {
            "name": "web",
            "active": True,
            "events": list(event_types) or ["*"],
            "config": {"url": url, "content_type": "json", "secret": secret, "insecure_ssl": "0"},
        }
        return _registration(self._json(self._call("POST", self._hooks, json_body=body)))

    def describe(self) -> Registration:
        return _registration(self._json(self._call("GET", self._hook())))

    def unregister(self) -> None:
        self._call("DELETE", self._hook())

    def attempts_page(self, *, token: str | None) -> Page[Attempt]:
        params = {"per_page": str(self.page_size)}
        if token is not None:
            params["cursor"] = token
        response = self._call("GET", f"{self._hook()}/deliveries", params=params)
        items = self._json(response)
        if not isinstance(items, list):
            raise RemoteError("GitHub's deliveries are not a list", reason=BAD_ANSWER)
        return Page(
            items=[_attempt(item) for item in items],
            next_token=_next_cursor(response),
            quota=_quota(response),
        )

    def redeliver(self, attempt_id: str) -> None:
        if not _number(attempt_id):
            raise ValueError("a GitHub delivery id is a number")
        self._call("POST", f"{self._hook()}/deliveries/{attempt_id}/attempts")

    def _hook(self) -> str:
        if self._hook_id is None:
            raise ValueError("the endpoint has no GitHub hook yet")
        return f"{self._hooks}/{self._hook_id}"

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: JSONObject | None = None,
    ) -> requests.Response:
        return self._send(method, path, self._token(), params=params, json_body=json_body)

    def _send(
        self,
        method: str,
        path: str,
        bearer: str,
        *,
        params: Mapping[str, str] | None = None,
        json_body: JSONObject | None = None,
    ) -> requests.Response:
        """One request, its answer if it is a success; RemoteError otherwise. Redirects
        are not followed: a renamed repository answers 301 (the endpoint's scope is out of
        date), and the budget counts one request a call."""
        try:
            response = self._session.request(
                method,
                self._base + path,
                params=params,
                json=json_body,
                auth=_Bearer(bearer),
                timeout=self._timeout,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            raise RemoteError(
                f"GitHub's API did not answer ({type(exc).__name__})", reason=UNREACHABLE
            ) from exc
        if not 200 <= response.status_code < 300:
            if response.status_code == 401 and self._installation is not None:
                self._installation = None  # revoked or expired early: ask for another
            raise self._error(response)
        return response

    def _token(self) -> str:
        """The token to send: the credential's own, or the App's installation token, asked
        for when there is none or it expires within MARGIN."""
        if "token" in self._credentials:
            return self._credentials["token"]
        now = self._clock()
        if self._installation is None or self._installation[1] - MARGIN <= now:
            self._installation = self._installation_token(now)
        return self._installation[0]

    def _installation_token(self, now: datetime) -> tuple[str, datetime]:
        signed = app_jwt(self._credentials, now=now)
        installation = self._credentials["installation_id"]
        path = f"/app/installations/{installation}/access_tokens"
        answer = self._json(self._send("POST", path, signed))
        if not isinstance(answer, dict):
            answer = {}
        token, expires_at = answer.get("token"), occurred_at(answer.get("expires_at"))
        if not isinstance(token, str) or not token or expires_at is None:
            raise RemoteError(
                "GitHub's installation token has no token or expires_at", reason=BAD_ANSWER
            )
        return token, expires_at

    def _json(self, response: requests.Response) -> JSON:
        try:
            value: JSON = response.json()
        except NOT_JSON:
            raise RemoteError(
                f"GitHub answered {response.status_code} with a body that is not JSON",
                reason=BAD_ANSWER,
                status=response.status_code,
            ) from None
        return value

    def _error(self, response: requests.Response) -> RemoteError:
        status = response.status_code
        message = _message(response) or f"GitHub answered {status}"
        if 300 <= status < 400:
            message = (
                f"GitHub answered {status}: the repository or organisation was renamed or moved"
            )
        headers = response.headers
        limited = (
            headers.get("x-ratelimit-remaining") == "0"
            or "retry-after" in headers
            or SECONDARY_LIMIT in message.lower()
        )
        if status == 429 or (status == 403 and limited):
            reason, retry_after = RATE_LIMITED, self._retry_after(headers)
            return RemoteError(message, reason=reason, status=status, retry_after=retry_after)
        return RemoteError(message, reason=_reason(status), status=status)

    def _retry_after(self, headers: Mapping[str, str]) -> float:
        """Retry-After's seconds; else, the quota spent, the seconds until
        x-ratelimit-reset; else a minute (a secondary rate limit)."""
        seconds = _whole_number(headers.get("retry-after"))
        if seconds is not None:
            return float(seconds)
        reset = _whole_number(headers.get("x-ratelimit-reset"))
        if reset is None or headers.get("x-ratelimit-remaining") != "0":
            return SECONDARY_WAIT
        return max(0.0, reset - self._clock().timestamp())


class GitHubEnterpriseAPI(GitHubAPI):
    """A hook on GitHub Enterprise Server (``place.api_url`` is https://HOST/api/v3)."""

    # Enterprise Server keeps a hook's deliveries for 7 days.
    horizon = timedelta(days=7)


def remote_api(credentials: Mapping[str, str], place: Place) -> GitHubAPI:
    """github.com's API, or Enterprise Server's where ``place.api_url`` is another."""
    if place.api_url is None or place.api_url.rstrip("/") == API_URL:
        return GitHubAPI(credentials, place)
    return GitHubEnterpriseAPI(credentials, place)


def _reason(status: int) -> str:
    if status == 401:
        return UNAUTHORIZED
    if status == 403:
        return FORBIDDEN
    if status in (404, 410) or 300 <= status < 400:  # 301: the repository moved
        return NOT_FOUND
    if status >= 500:
        return SERVER_ERROR
    if 400 <= status < 500:
        return INVALID
    return BAD_ANSWER


def _message(response: requests.Response) -> str | None:
    """GitHub's own words: the error body's ``message``, shortened."""
    try:
        body = response.json()
    except NOT_JSON:
        return None
    message = body.get("message") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message.strip():
        return None
    return message.strip()[:MESSAGE_LENGTH]


def _registration(hook: JSON) -> Registration:
    if not isinstance(hook, dict):
        raise RemoteError("GitHub's hook is not an object", reason=BAD_ANSWER)
    hook_id, active, events = hook.get("id"), hook.get("active"), hook.get("events")
    config = hook.get("config")
    url = config.get("url") if isinstance(config, dict) else None
    if not (
        _integer(hook_id)
        and isinstance(active, bool)
        and isinstance(url, str)
        and isinstance(events, list)
        and all(isinstance(event, str) for event in events)
    ):
        raise RemoteError(
            "GitHub's hook lacks an id, active, events or config.url", reason=BAD_ANSWER
        )
    return Registration(
        hook_id=str(hook_id),
        url=url,
        event_types=tuple(str(event) for event in events),
        enabled=active,
    )


def _attempt(item: JSON) -> Attempt:
    """One hook-delivery-item: its guid is the X-GitHub-Delivery all its attempts share."""
    if not isinstance(item, dict):
        raise RemoteError("a GitHub delivery is not an object", reason=BAD_ANSWER)
    delivery_id, guid, status_code = item.get("id"), item.get("guid"), item.get("status_code")
    event = item.get("event")
    at = occurred_at(item.get("delivered_at"))
    if not (
        _integer(delivery_id)
        and isinstance(guid, str)
        and guid
        and _integer(status_code)
        and isinstance(event, str)
        and at is not None
    ):
        raise RemoteError(
            "a GitHub delivery lacks an id, guid, delivered_at, status_code or event",
            reason=BAD_ANSWER,
        )
    return Attempt(
        delivery_id=guid,
        attempt_id=str(delivery_id),
        at=at,
        succeeded=isinstance(status_code, int) and 200 <= status_code < 300,
        event_type=event,
    )


def _next_cursor(response: requests.Response) -> str | None:
    """The ``cursor`` of the Link header's rel="next" URL; None on the last page."""
    link = response.links.get("next")
    if link is None:
        return None
    cursors = parse_qs(urlsplit(link.get("url", "")).query).get("cursor")
    if not cursors:
        raise RemoteError("GitHub's next page has no cursor", reason=BAD_ANSWER)
    return cursors[0]


def _quota(response: requests.Response) -> Quota:
    remaining = _whole_number(response.headers.get("x-ratelimit-remaining"))
    reset = _whole_number(response.headers.get("x-ratelimit-reset"))
    reset_at = datetime.fromtimestamp(reset, UTC) if reset is not None else None
    return Quota(remaining=remaining, reset_at=reset_at)


def _scope(scope: str | None) -> str:
    """``repos/OWNER/NAME`` or ``orgs/ORG``, as the path of its hooks."""
    names = (scope or "").split("/")[1:]
    if scope is None or not SCOPE.fullmatch(scope) or {".", ".."} & set(names):
        raise ValueError("a GitHub hook's scope is 'repos/OWNER/NAME' or 'orgs/ORG'")
    return scope


def _base_url(api_url: str | None) -> str:
    base = (api_url or API_URL).rstrip("/")
    if urlsplit(base).scheme not in ("https", "http") or not urlsplit(base).netloc:
        raise ValueError("a GitHub API URL is https://HOST (Enterprise Server: /api/v3)")
    return base


def _user_agent() -> str:
    try:
        return f"hooklatch/{version('hooklatch')}"
    except PackageNotFoundError:
        return "hooklatch"


def _integer(value: JSON) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


def _whole_number(text: str | None) -> int | None:
    """A header's count of seconds, or a unix time; None when it is absent or not one."""
    return unix_timestamp(text.strip()) if text is not None else None
