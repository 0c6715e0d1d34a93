"""GitLab: a secret token (``mode=token``, the default) or a signing token (``mode=signing``).

Token mode: GitLab sends the webhook's secret token as it is, in ``X-Gitlab-Token``, and
it is compared in constant time with each active secret. This authenticates the sender
only. **It gives no body integrity**: nothing is signed, so a body changed on the way is
accepted, and anyone who has seen one request (a proxy, a log) can send any body with its
token. There is no timestamp either; the dedupe key is the only protection against
replays. Use signing mode where the GitLab instance offers it.

Signing mode: GitLab's signing token (``whsec_<base64>``) signs ``{webhook-id}.
{webhook-timestamp}.{body}`` as Standard Webhooks ``v1`` (HMAC-SHA256, base64), checked by
the standard-webhooks provider's code, with its 5-minute tolerance both ways.

Dedupe key: in signing mode ``webhook-id``, which the signature covers (GitLab sends the
same value as ``Idempotency-Key``, which it does not); in token mode ``Idempotency-Key``
(GitLab 17.4+, kept when a failed hook is re-sent), else ``X-Gitlab-Event-UUID``. Event type:
``X-Gitlab-Event`` ("Push Hook"), else the body's ``object_kind``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from hooklatch.errors import MalformedRequest
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.parsing import json_object
from hooklatch.providers.signing import check_signatures
from hooklatch.providers.standard_webhooks import HMAC_SCHEME, signed_headers, verify_signed

TOKEN, SIGNING = "token", "signing"
MODES = (TOKEN, SIGNING)
ID_HEADERS = ("Idempotency-Key", "webhook-id", "X-Gitlab-Event-UUID")


class GitLabProvider(Provider):
    name = "gitlab"
    # GitLab does not retry a failed delivery (it disables a failing hook for a while
    # instead); a person may re-send one from "Recent events", which keeps two days, with
    # the same Idempotency-Key.
    retry_window = timedelta(days=3)
    tolerance = timedelta(minutes=5)  # signing mode only
    # The secret token itself, sent in either mode when the hook has one.
    credential_headers = frozenset({"X-Gitlab-Token"})
    options = {
        "mode": (
            "token (default): X-Gitlab-Token must equal a secret (no body integrity); "
            "signing: a Standard Webhooks signature with a whsec_ signing token"
        ),
    }

    def check_options(self, options: Mapping[str, str]) -> dict[str, str]:
        checked = super().check_options(options)
        mode = checked.setdefault("mode", TOKEN)
        if mode not in MODES:
            raise ValueError(f"gitlab option mode must be one of {', '.join(MODES)}, not {mode!r}")
        return checked

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        if _mode(delivery) == SIGNING:
            verify_signed(
                delivery,
                secrets=secrets,
                now=now,
                tolerance=self.tolerance,
                schemes=(HMAC_SCHEME,),
                prefixes=("webhook",),
            )
            return
        check_signatures(
            [require_header(delivery, "X-Gitlab-Token")],
            secrets=secrets,
            sign=lambda secret: secret,  # the token is the secret itself
            refusal="X-Gitlab-Token matches no active secret",
        )

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        delivery_id: str | None
        if _mode(delivery) == SIGNING:
            # webhook-id is signed, and verify has checked it; Idempotency-Key (the same
            # value from GitLab) is not, so a replay could choose it.
            delivery_id = require_header(delivery, "webhook-id")
        else:
            delivery_id = next((v for h in ID_HEADERS if (v := delivery.header(h))), None)
        if delivery_id is None:
            raise MalformedRequest(
                f"missing header {ID_HEADERS[0]} (or {', '.join(ID_HEADERS[1:])})",
                reason="missing_header",
            )
        payload = json_object(delivery.body)
        event_type = delivery.header("X-Gitlab-Event") or payload.get("object_kind")
        if not isinstance(event_type, str) or not event_type:
            raise MalformedRequest(
                "a GitLab delivery needs X-Gitlab-Event or a string object_kind",
                reason="malformed_body",
            )
        signed = _mode(delivery) == SIGNING
        return [IncomingEvent(external_id=delivery_id, type=event_type, id_signed=signed)]

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        if _mode(delivery) == TOKEN:
            return {"X-Gitlab-Token": secret}
        message_id = delivery.header("Idempotency-Key") or str(uuid.uuid4())
        return signed_headers(secret, message_id, now=now, body=delivery.body)

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        payload = {
            "object_kind": "push",
            "event_name": "push",
            "ref": "refs/heads/main",
            "before": "0" * 40,
            "after": "da1560886d4f094c3e6c9ef40349f7d38b5d27d7",
            "project": {"id": 15, "path_with_namespace": "demo/hooklatch"},
            "commits": [],
            "total_commits_count": 0,
        }
        headers = {
            "Content-Type": "application/json",
            "X-Gitlab-Event": "Push Hook",
            "Idempotency-Key": str(uuid.uuid4()),
            "X-Gitlab-Event-UUID": str(uuid.uuid4()),
            "User-Agent": "GitLab/17.11.0",
        }
        return headers, json.dumps(payload).encode()


def _mode(delivery: Delivery) -> str:
    return delivery.options.get("mode", TOKEN)
