"""FakeGitHub's routes: each request's script, credential, quota, and the answer of its
route, shaped as GitHub's REST API description says (tests/support/fake_github.py)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jwt

from tests.support.fake_github_objects import (
    PRIMARY_LIMIT,
    VERSIONS,
    Delivery,
    Hook,
    Logged,
    Problem,
    answer,
    checked_config,
    checked_events,
    delivery_item,
    error,
    hook_config,
    iso,
    number,
    scripted,
)
from tests.support.local_http import Answer

if TYPE_CHECKING:
    from tests.support.fake_github import FakeGitHub

NAME = r"[A-Za-z0-9_.-]+"
SCOPE = rf"/(?P<scope>repos/{NAME}/{NAME}|orgs/{NAME})"
HOOK = SCOPE + r"/hooks/(?P<hook>\d+)"
ANONYMOUS_LIMIT = 60
# The longest a GitHub App's JWT may live, and how far ahead of GitHub's clock it may be.
JWT_LONGEST = 600
JWT_DRIFT = 60
BAD_JWT = "A JSON web token could not be decoded"


@dataclass(frozen=True)
class Call:
    """A request on its way to a route: the path's named parts, the bearer credential."""

    request: Logged
    body: bytes
    groups: dict[str, str]
    credential: str

    @property
    def path(self) -> str:
        return self.request.path

    @property
    def query(self) -> dict[str, str]:
        return self.request.query

    def json_object(self) -> dict[str, Any]:
        try:
            body = json.loads(self.body or b"{}")
        except ValueError:
            raise Problem(400, "Problems parsing JSON") from None
        if not isinstance(body, dict):
            raise Problem(400, "Body should be a JSON object")
        return body


Result = tuple[int, Any, dict[str, str]]  # status, JSON body (None: none), headers
View = Callable[[Call], Result]


class Routes:
    def __init__(self, fake: FakeGitHub) -> None:
        self.fake = fake
        table: list[tuple[str, str, View]] = [
            ("POST", r"/app/installations/(?P<installation>\d+)/access_tokens", self.app_token),
            ("GET", SCOPE + "/hooks", self.list_hooks),
            ("POST", SCOPE + "/hooks", self.create_hook),
            ("GET", HOOK, self.get_hook),
            ("PATCH", HOOK, self.update_hook),
            ("DELETE", HOOK, self.delete_hook),
            ("GET", HOOK + "/deliveries", self.list_deliveries),
            ("GET", HOOK + r"/deliveries/(?P<delivery>\d+)", self.get_delivery),
            ("POST", HOOK + r"/deliveries/(?P<delivery>\d+)/attempts", self.redeliver),
        ]
        self.table = [(method, re.compile(pattern), view) for method, pattern, view in table]

    def answer(self, request: Logged, body: bytes) -> Answer:
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        credential = credential if scheme.lower() in ("bearer", "token") else ""
        used, reset = self.fake.count_request(credential or "anonymous")
        limit = self.fake.rate_limit if credential else ANONYMOUS_LIMIT
        quota = {
            "x-ratelimit-limit": str(limit),
            "x-ratelimit-remaining": str(max(0, limit - used)),
            "x-ratelimit-reset": str(reset),
            "x-ratelimit-used": str(used),
            "x-ratelimit-resource": "core",
        }
        script = self.fake.take_script(request.method, request.path)
        if script is not None:
            return scripted(script, quota)
        try:
            version = request.headers.get("x-github-api-version", VERSIONS[0])
            if version not in VERSIONS:
                raise Problem(400, f"API version {version} is not supported.")
            if used > limit:
                quota["x-ratelimit-remaining"] = "0"
                raise Problem(403, PRIMARY_LIMIT)
            status, content, headers = self.route(Call(request, body, {}, credential))
        except Problem as problem:
            return error(problem, quota)
        return answer(status, content, {**quota, **headers})

    def route(self, call: Call) -> Result:
        for method, pattern, view in self.table:
            match = pattern.fullmatch(call.path)
            if match and method == call.request.method:
                groups = {name: value for name, value in match.groupdict().items() if value}
                return view(Call(call.request, call.body, groups, call.credential))
        raise Problem(404, "Not Found")

    # Credentials.

    def authorize(self, call: Call, *, write: bool) -> None:
        if not call.credential:
            raise Problem(401, "Requires authentication")
        with self.fake.lock:
            grant = self.fake.tokens.get(call.credential)
        if grant is None or (grant[1] is not None and grant[1] <= self.fake.clock()):
            raise Problem(401, "Bad credentials")
        if write and not grant[0]:
            raise Problem(403, "Resource not accessible by personal access token")

    def app_token(self, call: Call) -> Result:
        """POST /app/installations/{installation_id}/access_tokens, with an App's JWT."""
        try:
            issuer = str(jwt.decode(call.credential, options={"verify_signature": False})["iss"])
        except (jwt.PyJWTError, KeyError):
            raise Problem(401, BAD_JWT) from None
        with self.fake.lock:
            app = self.fake.apps.get(issuer)
        if app is None:
            raise Problem(401, "Integration not found")
        public_key, installation = app
        try:
            claims = jwt.decode(
                call.credential,
                public_key,
                algorithms=["RS256"],
                options={"verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.PyJWTError:
            raise Problem(401, BAD_JWT) from None
        check_jwt_times(claims, now=self.fake.clock().timestamp())
        if call.groups["installation"] != installation:
            raise Problem(404, "Not Found")
        token, expires = self.fake.issue_installation_token()
        body = {
            "token": token,
            "expires_at": iso(expires),
            "permissions": {"metadata": "read", "repository_hooks": "write"},
            "repository_selection": "all",
        }
        return 201, body, {}

    # Hooks.

    def hook_of(self, call: Call, *, write: bool = False) -> Hook:
        self.authorize(call, write=write)
        with self.fake.lock:
            hook = self.fake.hooks.get(int(call.groups["hook"]))
        if hook is None or hook.scope != call.groups["scope"]:
            raise Problem(404, "Not Found")
        return hook

    def list_hooks(self, call: Call) -> Result:
        self.authorize(call, write=False)
        with self.fake.lock:
            hooks = [h for h in self.fake.hooks.values() if h.scope == call.groups["scope"]]
        return 200, [self.hook_json(hook) for hook in sorted(hooks, key=lambda h: h.id)], {}

    def create_hook(self, call: Call) -> Result:
        self.authorize(call, write=True)
        scope, body = call.groups["scope"], call.json_object()
        default_name = "web" if scope.startswith("repos/") else None
        if body.get("name", default_name) != "web":
            raise Problem(422, "Validation Failed", errors=["Name must be 'web'"])
        config = checked_config(body.get("config"), {"content_type": "form", "secret": ""})
        events = checked_events(body.get("events", ["push"]))
        active = body.get("active", True)
        if not isinstance(active, bool):
            raise Problem(422, "Validation Failed", errors=["active is not a boolean"])
        with self.fake.lock:
            if any(h.scope == scope and h.url == config["url"] for h in self.fake.hooks.values()):
                where = "repository" if scope.startswith("repos/") else "organization"
                raise Problem(
                    422, "Validation Failed", errors=[f"Hook already exists on this {where}"]
                )
            hook = self.fake.hook(
                self.fake.add_hook(
                    scope,
                    config["url"],
                    secret=config["secret"],
                    events=tuple(events),
                    active=active,
                    content_type=config["content_type"],
                )
            )
        if self.fake.ping_on_create and hook.active:
            ping = {"zen": "Design for failure.", "hook_id": hook.id, "hook": self.hook_json(hook)}
            self.fake.send_delivery(
                hook, str(uuid.uuid4()), "ping", json.dumps(ping).encode(), redelivery=False
            )
        return 201, self.hook_json(hook), {"Location": self.fake.url + call.path + f"/{hook.id}"}

    def get_hook(self, call: Call) -> Result:
        return 200, self.hook_json(self.hook_of(call)), {}

    def update_hook(self, call: Call) -> Result:
        """PATCH: active, config (any of its fields), events, add_events, remove_events."""
        hook, body = self.hook_of(call, write=True), call.json_object()
        config = hook_config(hook)
        if "config" in body:
            config = checked_config(body["config"], config)
        events = checked_events(body.get("events", hook.events))
        events += [e for e in checked_events(body.get("add_events", [])) if e not in events]
        events = [e for e in events if e not in body.get("remove_events", [])]
        active = body.get("active", hook.active)
        if not isinstance(active, bool):
            raise Problem(422, "Validation Failed", errors=["active is not a boolean"])
        self.fake.change_hook(
            hook.id, active=active, url=config["url"], events=events, secret=config["secret"]
        )
        with self.fake.lock:
            hook.content_type = config["content_type"]
        return 200, self.hook_json(hook), {}

    def delete_hook(self, call: Call) -> Result:
        self.fake.delete_hook(self.hook_of(call, write=True).id)
        return 204, None, {}

    def hook_json(self, hook: Hook) -> dict[str, Any]:
        """A ``hook`` (repository) or ``org-hook`` object; the secret shown as GitHub does."""
        url = f"{self.fake.url}/{hook.scope}/hooks/{hook.id}"
        config = hook_config(hook)
        if config["secret"]:
            config["secret"] = "********"
        body: dict[str, Any] = {
            "type": "Repository" if hook.scope.startswith("repos/") else "Organization",
            "id": hook.id,
            "name": "web",
            "active": hook.active,
            "events": list(hook.events),
            "config": config,
            "updated_at": iso(hook.updated_at),
            "created_at": iso(hook.created_at),
            "url": url,
            "ping_url": f"{url}/pings",
            "deliveries_url": f"{url}/deliveries",
        }
        if hook.scope.startswith("repos/"):
            body["test_url"] = f"{url}/test"
            body["last_response"] = dict(hook.last_response)
        return body

    # Deliveries.

    def list_deliveries(self, call: Call) -> Result:
        """Newest first, those of the last ``horizon``; ``cursor`` is where a page starts."""
        hook = self.hook_of(call)
        per_page = min(max(number(call.query.get("per_page"), default=30), 1), 100)
        since = self.fake.clock() - self.fake.horizon
        items = [d for d in self.fake.deliveries(hook.id) if d.delivered_at >= since]
        wanted = call.query.get("status")
        if wanted in ("success", "failure"):
            items = [d for d in items if (200 <= d.status_code < 300) == (wanted == "success")]
        if "cursor" in call.query:
            start = self.cursor_delivery(call.query["cursor"], hook)
            items = [d for d in items if (d.delivered_at, d.id) <= (start.delivered_at, start.id)]
        page, rest = items[:per_page], items[per_page:]
        headers = {}
        if rest:
            next_url = f"{self.fake.url}{call.path}?per_page={per_page}&cursor=v1_{rest[0].id}"
            headers["Link"] = f'<{next_url}>; rel="next"'
        return 200, [delivery_item(d) for d in page], headers

    def cursor_delivery(self, cursor: str, hook: Hook) -> Delivery:
        prefix, _, delivery_id = cursor.partition("_")
        delivery = self.fake.delivery(delivery_id) if delivery_id.isdigit() else None
        if prefix != "v1" or delivery is None or delivery.hook_id != hook.id:
            raise Problem(400, "Invalid cursor")
        return delivery

    def get_delivery(self, call: Call) -> Result:
        """A ``hook-delivery``: the item with the request it made."""
        delivery = self.delivery_of(call)
        body = {
            **delivery_item(delivery),
            "url": f"{self.fake.url}{call.path}",
            "request": {
                "headers": {"X-GitHub-Event": delivery.event, "X-GitHub-Delivery": delivery.guid},
                "payload": json.loads(delivery.payload),
            },
            "response": {"headers": {}, "payload": None},
        }
        return 200, body, {}

    def redeliver(self, call: Call) -> Result:
        self.fake.redeliver(self.delivery_of(call, write=True))
        return 202, {}, {}

    def delivery_of(self, call: Call, *, write: bool = False) -> Delivery:
        """The hook's delivery, while it is listed (within ``horizon``)."""
        hook = self.hook_of(call, write=write)
        delivery = self.fake.delivery(call.groups["delivery"])
        since = self.fake.clock() - self.fake.horizon
        if delivery is None or delivery.hook_id != hook.id or delivery.delivered_at < since:
            raise Problem(404, "Not Found")
        return delivery


def check_jwt_times(claims: dict[str, Any], *, now: float) -> None:
    """GitHub's rules for an App's JWT: issued in the past, expiring in at most 10 min."""
    issued, expires = claims.get("iat"), claims.get("exp")
    if not isinstance(issued, int) or issued > now + JWT_DRIFT:
        raise Problem(401, "'Issued at' claim ('iat') must be an Integer in the past")
    if not isinstance(expires, int) or expires <= now:
        raise Problem(401, "'Expiration time' claim ('exp') must be a time in the future")
    if expires - now > JWT_LONGEST:
        raise Problem(401, "'Expiration time' claim ('exp') is too far in the future")
