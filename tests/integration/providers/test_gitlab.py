"""GitLab through the real endpoint: the mode option stored and checked, the headers each
mode takes, and where the dedupe key and the type come from."""

import pytest

from hooklatch.errors import BadRequest
from tests.support.database import count
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.gitlab import push_body
from tests.support.providers.standard_webhooks import signed
from tests.support.signing import whsec


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
    response = post_json(client, endpoint, push_body(), {**headers, "Idempotency-Key": "k1"})
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql("SELECT external_id, type FROM events").one()
    assert tuple(stored) == ("k1", "Push Hook")


def test_signing_mode_does_not_take_a_bare_token(client, runtime):
    secret = whsec("gitlab-bare-token")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    headers = {"X-Gitlab-Token": secret, "X-Gitlab-Event": "Push Hook", "Idempotency-Key": "k1"}
    response = post_json(client, endpoint, push_body(), headers)
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


def test_signing_mode_refuses_svix_headers_and_v1a_entries(client, runtime):
    """GitLab sends webhook-* headers and v1 entries only."""
    secret = whsec("gitlab-narrow")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    body = push_body()
    svix = signed(secret, body, message_id="k1", prefix="svix")
    response = post_json(client, endpoint, body, {**svix, "X-Gitlab-Event": "Push Hook"})
    assert (response.status_code, response.json["error"]) == (400, "missing_header")
    webhook = {k.replace("svix", "webhook"): v for k, v in svix.items()}
    webhook["webhook-signature"] = "v1a," + webhook["webhook-signature"][3:]
    response = post_json(client, endpoint, body, {**webhook, "X-Gitlab-Event": "Push Hook"})
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
    response = post_json(client, endpoint, push_body(), {"X-Gitlab-Token": "t", **headers})
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == external_id


def test_without_any_delivery_id_the_request_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    response = post_json(client, endpoint, push_body(), {"X-Gitlab-Token": "t"})
    assert (response.status_code, response.json["error"]) == (400, "missing_header")
    assert count(runtime, "SELECT count(*) FROM events") == 0


def test_without_x_gitlab_event_the_type_is_the_object_kind(client, runtime):
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=["t"])
    response = post_json(
        client, endpoint, push_body(), {"X-Gitlab-Token": "t", "Idempotency-Key": "k"}
    )
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "push"


def test_in_signing_mode_without_idempotency_key_the_key_is_the_webhook_id(client, runtime):
    secret = whsec("gitlab-webhook-id")
    endpoint, _ = make_endpoint(runtime, "gitlab", secrets=[secret], options={"mode": "signing"})
    body = push_body()
    headers = {
        "X-Gitlab-Event": "Push Hook",
        "X-Gitlab-Event-UUID": "uuid",
        **signed(secret, body, message_id="wh-id"),
    }
    response = post_json(client, endpoint, body, headers)
    assert response.status_code == 200, response.json
    assert response.json["events"][0]["external_id"] == "wh-id"
