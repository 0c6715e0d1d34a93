"""GitLab through the conformance kit in both modes: signing tokens signed by the
standardwebhooks package, secret tokens sent as GitLab sends them."""

import json
from datetime import UTC, datetime

import pytest

from hooklatch.errors import BadRequest
from tests.conftest import count, make_endpoint
from tests.support.conformance import HttpConformance
from tests.support.signing import standard_webhooks_v1 as sdk_v1
from tests.support.signing import whsec


class GitLabConformance(HttpConformance):
    provider = "gitlab"
    delivery_id = "no-event-body"  # set by event_body: GitLab sends the id in a header

    def gitlab_headers(self):
        return {"X-Gitlab-Event": "Issue Hook", "Idempotency-Key": self.delivery_id}

    def event_body(self, event_id, *, note="hello"):
        self.delivery_id = event_id
        payload = {
            "object_kind": "issue",
            "event_type": "issue",
            "object_attributes": {"iid": 1, "title": note, "action": "open"},
        }
        return json.dumps(payload, ensure_ascii=False).encode()


class TestGitLabSigningConformance(GitLabConformance):
    secret = whsec("gitlab-signing-old")
    other_secret = whsec("gitlab-signing-new")
    options = {"mode": "signing"}
    signature_headers = ("webhook-signature",)
    signs_timestamp = True
    several_signatures = True

    def sign(self, body, *, secret, now, url):
        return self.sign_several(body, secrets=[secret], now=now, url=url)

    def sign_several(self, body, *, secrets, now, url):
        # GitLab sends webhook-id equal to Idempotency-Key.
        entries = [sdk_v1(secret, self.delivery_id, now, body) for secret in secrets]
        return {
            **self.gitlab_headers(),
            "webhook-id": self.delivery_id,
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": " ".join(entries),
        }


class TestGitLabTokenConformance(GitLabConformance):
    secret = "gitlab-token-old"
    other_secret = "gitlab-token-new"
    signature_headers = ("X-Gitlab-Token",)
    # A secret token signs nothing: a changed body cannot be noticed (see the test below).
    test_tampered_body_is_refused = None

    def sign(self, body, *, secret, now, url):
        return {**self.gitlab_headers(), "X-Gitlab-Token": secret}

    def test_token_mode_cannot_notice_a_tampered_body(self):
        body = self.event_body("evt_conf_tampered")
        url = self.endpoint([self.secret])
        headers = self.headers(body, secret=self.secret, url=url)
        assert self.deliver(url, body.replace(b"hello", b"hellp"), headers).accepted


# -- options and headers -----------------------------------------------------------------


def post(client, endpoint, body, headers):
    return client.post(
        f"/hooks/{endpoint}", data=body, headers={"Content-Type": "application/json", **headers}
    )


def push_body():
    return json.dumps({"object_kind": "push", "ref": "refs/heads/main"}).encode()


def test_the_mode_defaults_to_token_and_is_stored(runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    with runtime.engine.connect() as c:
        options = c.exec_driver_sql("SELECT options FROM endpoints WHERE id = %s", (endpoint,))
        assert options.scalar_one() == {"mode": "token"}


@pytest.mark.parametrize("options", [{"mode": "hmac"}, {"signing": "yes"}])
def test_an_unknown_mode_or_option_is_refused(runtime, options):
    with pytest.raises(BadRequest) as refused:
        make_endpoint(runtime, "gitlab", secrets=["t"], options=options)
    assert refused.value.reason == "bad_option"


def test_token_mode_accepts_the_token_and_types_by_x_gitlab_event(client, runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["s3cret token"])
    headers = {"X-Gitlab-Token": "s3cret token", "X-Gitlab-Event": "Push Hook"}
    response = post(client, endpoint, push_body(), {**headers, "Idempotency-Key": "k1"})
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql("SELECT external_id, type FROM events").one()
    assert tuple(stored) == ("k1", "Push Hook")


def test_signing_mode_does_not_take_a_bare_token(client, runtime):
    secret = whsec("gitlab-bare-token")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    headers = {"X-Gitlab-Token": secret, "X-Gitlab-Event": "Push Hook", "Idempotency-Key": "k1"}
    response = post(client, endpoint, push_body(), headers)
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


def test_signing_mode_refuses_svix_headers_and_v1a_entries(client, runtime):
    """GitLab sends webhook-* headers and v1 entries only."""
    secret = whsec("gitlab-narrow")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    body, now = push_body(), datetime.now(UTC)
    svix = {
        "svix-id": "k1",
        "svix-timestamp": str(int(now.timestamp())),
        "svix-signature": sdk_v1(secret, "k1", now, body),
    }
    response = post(client, endpoint, body, {**svix, "X-Gitlab-Event": "Push Hook"})
    assert (response.status_code, response.json["error"]) == (400, "missing_header")
    webhook = {k.replace("svix", "webhook"): v for k, v in svix.items()}
    webhook["webhook-signature"] = "v1a," + webhook["webhook-signature"][3:]
    response = post(client, endpoint, body, {**webhook, "X-Gitlab-Event": "Push Hook"})
    assert (response.status_code, response.json["error"]) == (400, "malformed_header")


@pytest.mark.parametrize(
    ("headers", "external_id"),
    [
        ({"Idempotency-Key": "idem", "X-Gitlab-Event-UUID": "uuid"}, "idem"),
        ({"X-Gitlab-Event-UUID": "uuid"}, "uuid"),
    ],
)
def test_the_dedupe_key_falls_back_to_the_event_uuid(client, runtime, headers, external_id):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    response = post(client, endpoint, push_body(), {"X-Gitlab-Token": "t", **headers})
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == external_id


def test_without_any_delivery_id_the_request_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    response = post(client, endpoint, push_body(), {"X-Gitlab-Token": "t"})
    assert (response.status_code, response.json["error"]) == (400, "missing_header")
    assert count(runtime, "SELECT count(*) FROM events") == 0


def test_without_x_gitlab_event_the_type_is_the_object_kind(client, runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    response = post(client, endpoint, push_body(), {"X-Gitlab-Token": "t", "Idempotency-Key": "k"})
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "push"


def test_in_signing_mode_without_idempotency_key_the_key_is_the_webhook_id(client, runtime):
    secret = whsec("gitlab-webhook-id")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    body, now = push_body(), datetime.now(UTC)
    headers = {
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "uuid",
        "webhook-id": "wh-id",
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": sdk_v1(secret, "wh-id", now, body),
    }
    response = post(client, endpoint, body, headers)
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == "wh-id"
