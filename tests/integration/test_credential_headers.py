"""Headers that carry a credential (GitLab's X-Gitlab-Token) are never stored, shown,
logged or handed to handlers."""

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from sqlalchemy import text

from hooklatch.errors import VerificationError
from hooklatch.providers.base import (
    Delivery,
    IncomingEvent,
    Provider,
    any_digest_matches,
    require_header,
)
from tests.support.database import count, load_event
from tests.support.pipeline import drain, make_endpoint, post_json
from tests.support.providers.gitlab import push_body
from tests.support.tokens import AUTH

TOKEN = "glpat-Credential-Header-Token-7f3a"


def everything_stored(runtime):
    """Every row that an event leads to, as text."""
    with runtime.engine.connect() as c:
        rows = c.execute(
            text(
                "SELECT e::text FROM events AS e UNION ALL SELECT a::text FROM attempts AS a "
                "UNION ALL SELECT o::text FROM outbox AS o"
            )
        )
        return "\n".join(row[0] for row in rows)


def test_a_gitlab_token_is_not_stored_shown_logged_or_handed_to_handlers(
    client, runtime, router, caplog
):
    caplog.set_level(logging.DEBUG)
    seen = []
    router.on("gitlab", "*")(lambda event, ctx: seen.append(dict(event.headers)))
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[TOKEN])
    headers = {"X-Gitlab-Token": TOKEN, "X-Gitlab-Event": "Push Hook", "Idempotency-Key": "k1"}

    response = post_json(client, endpoint, push_body(), headers)
    assert response.status_code == 200, response.json
    event_id = response.json["events"][0]["id"]
    refused = post_json(client, endpoint, push_body(), {**headers, "X-Gitlab-Token": TOKEN[:-1]})
    assert refused.status_code == 401
    drain(runtime)

    stored = load_event(runtime, event_id)
    assert stored.status == "processed"
    assert "x-gitlab-token" not in stored.headers
    assert stored.headers["x-gitlab-event"] == "Push Hook"  # the others are kept
    assert TOKEN not in everything_stored(runtime)
    shown = client.get(f"/admin/events/{event_id}", headers=AUTH)
    assert shown.status_code == 200
    assert TOKEN not in shown.get_data(as_text=True)
    [handed] = seen
    assert "x-gitlab-token" not in handed
    assert handed["idempotency-key"] == "k1"
    assert caplog.records
    assert not [r for r in caplog.records if TOKEN[:-1] in r.getMessage() + str(r.__dict__)]


class HeaderTokenProvider(Provider):
    """A sender whose token header is an endpoint option, beside a fixed key header."""

    name = "header-token"
    retry_window = timedelta(days=1)
    credential_headers = frozenset({"X-Fixed-Key"})
    options = {"token_header": "the header carrying the token"}

    def credential_headers_for(self, options: Mapping[str, str]) -> frozenset[str]:
        return super().credential_headers_for(options) | {options["token_header"].lower()}

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        token = require_header(delivery, delivery.options["token_header"])
        if not any_digest_matches(secrets, [token]):
            raise VerificationError("the token matches no active secret")

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        return [IncomingEvent(require_header(delivery, "X-Id"), "webhook")]


def test_a_credential_header_named_by_an_endpoint_option_is_not_stored(client, runtime):
    runtime.providers["header-token"] = HeaderTokenProvider()
    endpoint, _ = make_endpoint(
        runtime, "header-token", secrets=[TOKEN], options={"token_header": "X-Acme-Token"}
    )
    headers = {"X-Acme-Token": TOKEN, "X-Fixed-Key": "k3y", "X-Id": "1", "X-Kept": "yes"}
    response = post_json(client, endpoint, b"{}", headers)
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql("SELECT headers FROM events").scalar_one()
    assert {"x-acme-token", "x-fixed-key"}.isdisjoint(stored)
    assert (stored["x-id"], stored["x-kept"]) == ("1", "yes")
    assert count(runtime, "SELECT count(*) FROM events") == 1
