"""What FakeGitHub holds (hooks, delivery attempts, scripted faults, the requests it was
sent) and how GitHub's REST API shows it: the hook-delivery-item, basic-error and
validation-error objects (tests/support/fake_github.py)."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from http import HTTPStatus
from typing import Any

from tests.support.local_http import Answer

DOCS = "https://docs.github.com/rest"
VERSIONS = ("2022-11-28", "2026-03-10")
EVENT_NAME = re.compile(r"\*|[a-z_]+")
PRIMARY_LIMIT = "API rate limit exceeded for user ID 1."
SECONDARY_LIMIT = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)


@dataclass
class Hook:
    """A hook as the fake holds it (its secret included, which the API never shows)."""

    id: int
    scope: str
    url: str
    secret: str
    events: list[str]
    active: bool
    content_type: str
    created_at: datetime
    updated_at: datetime
    last_response: dict[str, int | str | None] = field(
        default_factory=lambda: {"code": None, "status": "unused", "message": None}
    )


@dataclass
class Delivery:
    """One attempt of a delivery (a hook-delivery-item), with the payload it carried."""

    id: int
    hook_id: int
    guid: str
    event: str
    payload: bytes
    delivered_at: datetime
    status_code: int
    status: str
    redelivery: bool = False
    duration: float = 0.0
    repository_id: int | None = None

    @property
    def action(self) -> str | None:
        """The payload's ``action``, where it is a JSON object that has one."""
        try:
            payload = json.loads(self.payload)
        except ValueError:
            return None
        action = payload.get("action") if isinstance(payload, dict) else None
        return action if isinstance(action, str) else None


@dataclass
class Script:
    status: int
    times: int
    retry_after: int | None
    remaining: int | None
    path_contains: str | None
    method: str | None
    message: str | None
    body: bytes | None
    reset: int | None = None
    after: int = 0


@dataclass(frozen=True)
class Logged:
    """A request the fake was sent: ``query`` decoded, headers with lower-case names."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]


class Problem(Exception):
    """An error answer: GitHub's basic-error, or validation-error with ``errors``."""

    def __init__(self, status: int, message: str, *, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors


def delivery_item(delivery: Delivery) -> dict[str, Any]:
    """A ``hook-delivery-item``: an attempt as the deliveries list shows it."""
    return {
        "id": delivery.id,
        "guid": delivery.guid,
        "delivered_at": iso(delivery.delivered_at),
        "redelivery": delivery.redelivery,
        "duration": delivery.duration,
        "status": delivery.status,
        "status_code": delivery.status_code,
        "event": delivery.event,
        "action": delivery.action,
        "installation_id": None,
        "repository_id": delivery.repository_id,
        "throttled_at": None,
    }


def hook_config(hook: Hook) -> dict[str, str]:
    return {
        "content_type": hook.content_type,
        "insecure_ssl": "0",
        "url": hook.url,
        "secret": hook.secret,
    }


def checked_config(config: Any, defaults: dict[str, str]) -> dict[str, str]:
    if not isinstance(config, dict):
        raise Problem(422, "Validation Failed", errors=["config is not an object"])
    merged = {**defaults, **config}
    url = merged.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise Problem(422, "Validation Failed", errors=["Config must contain URL for webhooks"])
    if merged.get("content_type") not in ("json", "form"):
        raise Problem(422, "Validation Failed", errors=["content_type is not json or form"])
    if not isinstance(merged.get("secret", ""), str):
        raise Problem(422, "Validation Failed", errors=["secret is not a string"])
    return {key: str(value) for key, value in merged.items()}


def checked_events(events: Any) -> list[str]:
    if not isinstance(events, list) or not all(
        isinstance(e, str) and EVENT_NAME.fullmatch(e) for e in events
    ):
        raise Problem(422, "Validation Failed", errors=["Invalid events"])
    return list(events)


def scripted(script: Script, quota: dict[str, str]) -> Answer:
    headers = dict(quota)
    if script.remaining is not None:
        headers["x-ratelimit-remaining"] = str(script.remaining)
    if script.reset is not None:
        headers["x-ratelimit-reset"] = str(script.reset)
    if script.retry_after is not None:
        headers["retry-after"] = str(script.retry_after)
    if script.body is not None:
        return Answer(script.status, script.body, headers)
    return error(Problem(script.status, script.message or message_for(script)), headers)


def message_for(script: Script) -> str:
    if script.status in (403, 429) and script.retry_after is not None:
        return SECONDARY_LIMIT
    if script.status == 429 or (script.status == 403 and script.remaining == 0):
        return PRIMARY_LIMIT
    known = {
        401: "Bad credentials",
        403: "Resource not accessible by personal access token",
        422: "Validation Failed",
    }
    return known.get(script.status) or HTTPStatus(script.status).phrase


def error(problem: Problem, headers: dict[str, str]) -> Answer:
    body: dict[str, Any] = {
        "message": str(problem),
        "documentation_url": DOCS,
        "status": str(problem.status),
    }
    if problem.errors is not None:
        body["errors"] = [
            {"resource": "Hook", "code": "custom", "message": text} for text in problem.errors
        ]
    return answer(problem.status, body, headers)


def answer(status: int, body: Any, headers: dict[str, str]) -> Answer:
    common = {
        "x-github-api-version-selected": VERSIONS[0],
        "x-github-request-id": uuid.uuid4().hex[:20].upper(),
    }
    if body is None:
        return Answer(status, b"", {**common, **headers})
    content = {"Content-Type": "application/json; charset=utf-8"}
    return Answer(status, json.dumps(body).encode(), {**common, **content, **headers})


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def number(text: str | None, *, default: int) -> int:
    return int(text) if text is not None and text.isascii() and text.isdigit() else default


def status_text(status_code: int) -> str:
    """A hook-delivery-item's ``status`` for the receiver's answer."""
    if 200 <= status_code < 300:
        return "OK"
    return f"Invalid HTTP Response: {status_code}"
