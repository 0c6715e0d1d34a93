"""GitHub: ``X-Hub-Signature-256: sha256=<hex>`` over the body; dedupe on X-GitHub-Delivery.

Ordering key: the object the event is about, by event name (``SUBJECTS``). Pull requests,
issues and discussions are ``{owner}/{repo}#{number}``: they share one numbering per
repository, so a comment on a pull request (an ``issue_comment`` whose ``issue`` is the
pull request) joins the pull request's own events. Other subjects (a workflow run, a
check run, a release, ...) are their ``node_id``. Other events (``push``, ``ping``) have
no key. Position: the subject's ``updated_at``, else none (GitHub's events carry no time).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from urllib.parse import parse_qs

from hooklatch.errors import MalformedRequest
from hooklatch.jsontypes import JSON
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.github_api import remote_api
from hooklatch.providers.github_credentials import CREDENTIAL_FIELDS, check_credentials
from hooklatch.providers.keys import KeyedEvent, dotted, key_text, position_of
from hooklatch.providers.parsing import json_object, load_json, occurred_at
from hooklatch.providers.remote import Place, RemoteAPI
from hooklatch.providers.signing import check_signatures, hmac_hex

SIGNATURE = "X-Hub-Signature-256"
PREFIX = "sha256="
# Event name (X-GitHub-Event) -> the payload's field holding the object it changes.
SUBJECTS = {
    "pull_request": "pull_request",
    "pull_request_review": "pull_request",
    "pull_request_review_comment": "pull_request",
    "pull_request_review_thread": "pull_request",
    "issues": "issue",
    "issue_comment": "issue",
    "discussion": "discussion",
    "discussion_comment": "discussion",
    "check_run": "check_run",
    "check_suite": "check_suite",
    "workflow_run": "workflow_run",
    "workflow_job": "workflow_job",
    "deployment": "deployment",
    "deployment_status": "deployment",
    "release": "release",
    "milestone": "milestone",
}
NUMBERED = frozenset({"pull_request", "issue", "discussion"})


def _signature(secret: str, body: bytes) -> str:
    return PREFIX + hmac_hex(secret, body)


def _subject_field(event: KeyedEvent) -> str | None:
    return SUBJECTS.get(event.type.partition(".")[0])  # the type is "{event}.{action}"


def _numbered(repository: JSON, subject: JSON) -> str | None:
    """``owner/repo#12``, or None unless the name is text and the number a count."""
    number = dotted(subject, "number")
    if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 2**63:
        return None
    if not isinstance(repository, str) or not repository:
        return None
    return key_text(f"{repository}#{number}")


class GitHubProvider(Provider):
    name = "github"
    # GitHub does not retry; a person may redeliver for three days.
    retry_window = timedelta(days=3)
    generates_secret = True
    # A token, or a GitHub App's three fields (hooklatch.providers.github_credentials).
    credential_fields = CREDENTIAL_FIELDS

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = require_header(delivery, SIGNATURE, prefix=PREFIX)
        check_signatures(
            [signature], secrets=secrets, sign=lambda secret: _signature(secret, delivery.body)
        )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        delivery_id = require_header(delivery, "X-GitHub-Delivery")
        event = require_header(delivery, "X-GitHub-Event")
        payload = json_object(self._json_bytes(delivery.headers, delivery.body))
        action = payload.get("action")
        event_type = f"{event}.{action}" if isinstance(action, str) and action else event
        # Only the body is signed: X-GitHub-Delivery is not (id_signed stays False).
        return [IncomingEvent(external_id=delivery_id, type=event_type)]

    def ordering_key(self, event: KeyedEvent) -> str | None:
        field = _subject_field(event)
        if field is None:
            return None
        subject = dotted(event.payload, field)
        if field in NUMBERED:
            return _numbered(dotted(event.payload, "repository.full_name"), subject)
        return key_text(dotted(subject, "node_id"))

    def ordering_position(self, event: KeyedEvent) -> int | None:
        field = _subject_field(event)
        updated_at = occurred_at(dotted(event.payload, f"{field}.updated_at")) if field else None
        return position_of(updated_at or event.occurred_at)

    def payload(self, headers: Mapping[str, str], body: bytes) -> JSON:
        try:
            return load_json(self._json_bytes(headers, body))
        except MalformedRequest:
            return None

    @staticmethod
    def _json_bytes(headers: Mapping[str, str], body: bytes) -> bytes:
        """Hooks set to application/x-www-form-urlencoded send the JSON as ``payload=``."""
        content_type = headers.get("content-type", "")
        if not content_type.startswith("application/x-www-form-urlencoded"):
            return body
        try:
            fields = parse_qs(body.decode(), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            raise MalformedRequest("form body is malformed", reason="malformed_body") from None
        if "payload" not in fields:
            raise MalformedRequest("form body has no payload field", reason="malformed_body")
        return fields["payload"][0].encode()

    def check_credentials(self, values: Mapping[str, str]) -> dict[str, str]:
        return check_credentials(values)

    def remote(self, credentials: Mapping[str, str], place: Place) -> RemoteAPI:
        return remote_api(credentials, place)

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        return {SIGNATURE: _signature(secret, delivery.body)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "zen": "Keep it logically awesome.",
            "hook_id": 1,
            "hook": {"type": "Repository"},
        }
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "ping",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "User-Agent": "GitHub-Hookshot/hooklatch-test",
        }
        return headers, json.dumps(payload).encode()
