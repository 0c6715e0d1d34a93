"""GitHubAPI against FakeGitHub, a local server that answers as GitHub's REST API
description says: registration and drift, paging by cursor, the horizon, redelivery
arriving signed, errors and rate limits, a GitHub App's tokens, and no secret in any
error or log."""

from __future__ import annotations

import logging
import socket
from datetime import UTC, datetime, timedelta

import pytest
import requests

from hooklatch.providers.base import Delivery
from hooklatch.providers.github import GitHubProvider
from hooklatch.providers.github_api import GitHubAPI
from hooklatch.providers.github_credentials import app_jwt
from hooklatch.providers.remote import PUSH, Place, RemoteError
from tests.support.fake_github import FakeGitHub
from tests.support.local_http import Receiver
from tests.support.rsa_keys import rsa_key_pair

TOKEN = "github_pat_11AAAAAAA0abcdefghijklmnopqrstuvwxyz"
SCOPE = "repos/octo-org/widgets"
SECRET = "hook-secret-made-by-hooklatch"
RECEIVER_URL = "https://hooks.example.com/hooks/ep_1"


class Clock:
    """A clock a test moves; the fake and the client share it."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def fake(clock):
    with FakeGitHub(clock=clock) as server:
        server.add_token(TOKEN)
        yield server


@pytest.fixture
def receiver():
    with Receiver() as server:
        yield server


def api_for(fake, clock, hook_id=None, *, credentials=None, scope=SCOPE):
    place = Place(api_url=fake.url, scope=scope, hook_id=None if hook_id is None else str(hook_id))
    return GitHubAPI(credentials or {"token": TOKEN}, place, clock=clock)


# Registration.


def test_register_creates_a_web_hook_holding_the_url_event_types_and_secret(fake, clock):
    registration = api_for(fake, clock).register(
        url=RECEIVER_URL, event_types=["push", "issues"], secret=SECRET
    )

    hook = fake.hook(registration.hook_id)
    assert (registration.url, registration.event_types, registration.enabled) == (
        RECEIVER_URL,
        ("push", "issues"),
        True,
    )
    assert (hook.url, hook.secret, hook.content_type, hook.scope) == (
        RECEIVER_URL,
        SECRET,
        "json",
        SCOPE,
    )
    sent = fake.requests[-1]
    assert (sent.method, sent.path) == ("POST", f"/{SCOPE}/hooks")
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.headers["accept"] == "application/vnd.github+json"
    assert sent.headers["x-github-api-version"] == "2022-11-28"
    assert sent.headers["user-agent"].startswith("hooklatch")


def test_register_with_no_event_types_subscribes_to_every_event(fake, clock):
    registration = api_for(fake, clock).register(url=RECEIVER_URL, event_types=[], secret=SECRET)

    assert registration.event_types == ("*",)


def test_an_organisation_hook_is_registered_and_described(fake, clock):
    registration = api_for(fake, clock, scope="orgs/octo-org").register(
        url=RECEIVER_URL, event_types=["member"], secret=SECRET
    )
    described = api_for(fake, clock, registration.hook_id, scope="orgs/octo-org").describe()

    assert described == registration
    assert fake.requests[-1].path == f"/orgs/octo-org/hooks/{registration.hook_id}"


def test_describe_shows_a_hook_disabled_and_repointed_at_github(fake, clock):
    registration = api_for(fake, clock).register(url=RECEIVER_URL, event_types=[], secret=SECRET)
    hook_id = registration.hook_id
    changed = requests.patch(
        f"{fake.url}/{SCOPE}/hooks/{hook_id}",
        json={"active": False, "config": {"url": "https://elsewhere.example/hook"}},
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=5,
    )
    assert changed.status_code == 200, changed.text

    described = api_for(fake, clock, hook_id).describe()

    assert (described.enabled, described.url) == (False, "https://elsewhere.example/hook")
    assert fake.hook(hook_id).secret == SECRET  # a PATCH without a secret keeps it


def test_unregister_deletes_the_hook_and_then_it_is_not_found(fake, clock):
    registration = api_for(fake, clock).register(url=RECEIVER_URL, event_types=[], secret=SECRET)
    api = api_for(fake, clock, registration.hook_id)

    api.unregister()

    for call in (api.describe, api.unregister):
        with pytest.raises(RemoteError) as raised:
            call()
        assert (raised.value.reason, raised.value.status) == ("not_found", 404)


def test_a_hook_in_another_repository_is_not_found(fake, clock):
    hook_id = fake.add_hook("repos/someone/else", RECEIVER_URL, secret=SECRET)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, hook_id).describe()

    assert raised.value.reason == "not_found"


def test_registering_the_same_url_twice_is_invalid_in_githubs_words(fake, clock):
    api = api_for(fake, clock)
    api.register(url=RECEIVER_URL, event_types=[], secret=SECRET)

    with pytest.raises(RemoteError) as raised:
        api.register(url=RECEIVER_URL, event_types=[], secret=SECRET)

    assert (raised.value.reason, raised.value.status) == ("invalid", 422)
    assert str(raised.value) == "Validation Failed"


# Deliveries.


def test_250_attempts_come_in_three_pages_by_the_link_headers_cursor(fake, clock):
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    for n in range(250):
        at = clock.now - timedelta(minutes=n)
        fake.record(hook_id, f"guid-{n}", "push", {"n": n}, 200, at)
    api = api_for(fake, clock, hook_id)

    pages, token = [], None
    for _ in range(5):  # a cursor that does not move would page forever
        page = api.attempts_page(token=token)
        pages.append(page)
        token = page.next_token
        if token is None:
            break

    assert [len(page.items) for page in pages] == [100, 100, 50]
    delivery_ids = [attempt.delivery_id for page in pages for attempt in page.items]
    assert delivery_ids == [f"guid-{n}" for n in range(250)]  # newest first, none twice
    listed = [r for r in fake.requests if r.path.endswith("/deliveries")]
    cursors = [None, pages[0].next_token, pages[1].next_token]
    assert [r.query.get("cursor") for r in listed] == cursors
    assert all(r.query["per_page"] == "100" for r in listed)


def test_attempts_older_than_three_days_are_not_listed(fake, clock):
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    fake.record(hook_id, "recent", "push", {}, 502, clock.now - timedelta(days=2, hours=23))
    fake.record(hook_id, "too-old", "push", {}, 502, clock.now - timedelta(days=3, hours=1))

    page = api_for(fake, clock, hook_id).attempts_page(token=None)

    assert [attempt.delivery_id for attempt in page.items] == ["recent"]
    assert GitHubAPI.horizon == timedelta(days=3)


def test_an_attempt_says_its_delivery_id_time_outcome_and_event(fake, clock):
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    at = clock.now - timedelta(hours=1)
    attempt_id = fake.record(hook_id, "guid-1", "issues", {"action": "opened"}, 502, at)

    page = api_for(fake, clock, hook_id).attempts_page(token=None)

    (attempt,) = page.items
    assert (attempt.delivery_id, attempt.attempt_id, attempt.at, attempt.succeeded) == (
        "guid-1",
        str(attempt_id),
        at,
        False,
    )
    assert attempt.event_type == "issues"
    assert attempt.at.tzinfo is not None
    assert page.quota.remaining == 5000 - 1
    assert page.quota.reset_at is not None and page.quota.reset_at > clock.now


def test_a_redelivery_arrives_signed_with_the_same_delivery_id(fake, clock, receiver):
    hook_id = fake.add_hook(SCOPE, receiver.url, secret=SECRET, events=("issues",))
    guid = fake.deliver(hook_id, "issues", {"action": "opened", "issue": {"number": 7}}, fail=True)
    api = api_for(fake, clock, hook_id)
    (failed,) = api.attempts_page(token=None).items
    assert receiver.received == [] and not failed.succeeded

    api.redeliver(failed.attempt_id)

    (request,) = receiver.received  # sent before the 202 was answered
    assert request.headers["x-github-delivery"] == guid
    delivery = Delivery(method="POST", url=receiver.url, headers=request.headers, body=request.body)
    GitHubProvider().verify(delivery, secrets=[SECRET], now=clock.now)
    assert [e.external_id for e in GitHubProvider().parse(delivery)] == [guid]
    attempts = api.attempts_page(token=None).items
    assert [(a.delivery_id, a.succeeded) for a in attempts] == [(guid, True), (guid, False)]
    assert fake.redeliveries(hook_id)[0].redelivery


def test_a_redelivery_goes_to_the_hooks_current_url_with_its_current_secret(clock, receiver):
    with FakeGitHub(clock=clock, background_redelivery=True) as fake:
        fake.add_token(TOKEN)
        hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret="old", events=("push",))
        guid = fake.deliver(hook_id, "push", {"ref": "refs/heads/main"}, fail=True)
        fake.change_hook(hook_id, url=receiver.url, secret=SECRET)
        attempt_id = fake.deliveries(hook_id)[0].id

        api_for(fake, clock, hook_id).redeliver(str(attempt_id))
        fake.settle()

    (request,) = receiver.received
    delivery = Delivery(method="POST", url=receiver.url, headers=request.headers, body=request.body)
    GitHubProvider().verify(delivery, secrets=[SECRET], now=clock.now)
    assert request.headers["x-github-delivery"] == guid
    assert request.headers["x-github-hook-id"] == str(hook_id)


def test_a_delivery_the_receiver_refuses_is_listed_as_failed(fake, clock):
    with Receiver(status=401) as refusing:
        hook_id = fake.add_hook(SCOPE, refusing.url, secret=SECRET)
        fake.deliver(hook_id, "push", {})

    (attempt,) = api_for(fake, clock, hook_id).attempts_page(token=None).items
    assert not attempt.succeeded
    assert fake.deliveries(hook_id)[0].status == "Invalid HTTP Response: 401"


# Errors.


@pytest.mark.parametrize(
    ("script", "reason", "retry_after"),
    [
        ({"status": 500}, "server_error", None),
        ({"status": 401}, "unauthorized", None),
        ({"status": 429, "retry_after": 30}, "rate_limited", 30.0),
        ({"status": 403, "retry_after": 60}, "rate_limited", 60.0),
        ({"status": 403}, "forbidden", None),
        ({"status": 404}, "not_found", None),
        ({"status": 301}, "not_found", None),
        ({"status": 422}, "invalid", None),
        ({"status": 400}, "invalid", None),
        ({"status": 200, "body": b"<html>unicorn</html>"}, "bad_answer", None),
    ],
    ids=lambda value: str(value) if not isinstance(value, dict) else str(value["status"]),
)
def test_an_error_answer_maps_to_its_reason_then_answers_resume(
    fake, clock, script, reason, retry_after
):
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    api = api_for(fake, clock, hook_id)
    fake.script(**script, path_contains="/hooks/")

    with pytest.raises(RemoteError) as raised:
        api.describe()

    error = raised.value
    assert (error.reason, error.status, error.retry_after) == (
        reason,
        script["status"],
        retry_after,
    )
    assert api.describe().hook_id == str(hook_id)


def test_github_own_words_are_the_message(fake, clock):
    fake.script(401)
    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, 1).describe()
    assert str(raised.value) == "Bad credentials"


def test_a_primary_rate_limit_waits_until_the_quota_resets(fake, clock):
    fake.script(403, remaining=0)
    clock.now += timedelta(minutes=10)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, 1).describe()

    assert raised.value.reason == "rate_limited"
    assert raised.value.retry_after == 50 * 60  # the hour's window began ten minutes ago


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_rate_limit_said_in_words_only_waits_a_minute(fake, clock, status):
    """GitHub may answer a secondary rate limit with neither retry-after nor a spent
    quota: its message says so, and its docs say to wait at least a minute."""
    fake.script(
        status,
        message="You have exceeded a secondary rate limit. Please wait a few minutes before "
        "you try again.",
    )

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, 1).describe()

    assert (raised.value.reason, raised.value.retry_after) == ("rate_limited", 60.0)


def test_a_spent_quota_is_a_rate_limit_until_the_window_resets(clock):
    with FakeGitHub(clock=clock, rate_limit=2) as fake:
        fake.add_token(TOKEN)
        hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
        api = api_for(fake, clock, hook_id)
        assert api.attempts_page(token=None).quota.remaining == 1
        assert api.attempts_page(token=None).quota.remaining == 0

        with pytest.raises(RemoteError) as raised:
            api.attempts_page(token=None)
        assert (raised.value.reason, raised.value.status) == ("rate_limited", 403)
        assert raised.value.retry_after == 3600

        clock.now += timedelta(hours=1)
        assert api.attempts_page(token=None).quota.remaining == 1


def test_a_revoked_token_is_unauthorized(fake, clock):
    fake.revoke(TOKEN)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock).register(url=RECEIVER_URL, event_types=[], secret=SECRET)

    assert (raised.value.reason, str(raised.value)) == ("unauthorized", "Bad credentials")


def test_a_token_that_only_reads_hooks_cannot_register_one(fake, clock):
    fake.add_token("read-only-token", write=False)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, credentials={"token": "read-only-token"}).register(
            url=RECEIVER_URL, event_types=[], secret=SECRET
        )

    assert raised.value.reason == "forbidden"


def test_no_answer_is_unreachable(clock):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        place = Place(api_url=f"http://127.0.0.1:{silent.getsockname()[1]}", scope=SCOPE)
        api = GitHubAPI({"token": TOKEN}, place, clock=clock, timeout=(1.0, 0.2))
        with pytest.raises(RemoteError) as raised:
            api.register(url=RECEIVER_URL, event_types=[], secret=SECRET)
    assert (raised.value.reason, raised.value.status) == ("unreachable", None)

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    place = Place(api_url=f"http://127.0.0.1:{port}", scope=SCOPE, hook_id="1")
    with pytest.raises(RemoteError) as raised:
        GitHubAPI({"token": TOKEN}, place, clock=clock).describe()
    assert raised.value.reason == "unreachable"


# A GitHub App.


@pytest.fixture(scope="module")
def app_key():
    return rsa_key_pair()


def app_credentials(private_key, installation_id="4242"):
    return {"app_id": "123456", "private_key": private_key, "installation_id": installation_id}


def test_a_github_app_asks_for_an_installation_token_and_keeps_it_until_a_minute_before_it_expires(
    fake, clock, app_key
):
    private_key, public_key = app_key
    fake.add_app("123456", public_key, 4242)
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    api = api_for(fake, clock, hook_id, credentials=app_credentials(private_key))

    api.describe()
    api.describe()
    clock.now += timedelta(minutes=58, seconds=59)
    api.describe()
    clock.now += timedelta(seconds=2)  # 59 min 1 s: the token expires within the minute
    api.describe()

    paths = [r.path for r in fake.requests]
    token_path = "/app/installations/4242/access_tokens"
    hook_path = f"/{SCOPE}/hooks/{hook_id}"
    assert paths == [token_path, hook_path, hook_path, hook_path, token_path, hook_path]
    sent = [r.headers["authorization"] for r in fake.requests if r.path == hook_path]
    assert sent[0].startswith("Bearer ghs_") and sent[0] == sent[1] == sent[2] != sent[3]


def test_a_revoked_installation_token_is_replaced_at_the_next_call(fake, clock, app_key):
    private_key, public_key = app_key
    fake.add_app("123456", public_key, 4242)
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    api = api_for(fake, clock, hook_id, credentials=app_credentials(private_key))
    api.describe()
    fake.revoke(fake.requests[-1].headers["authorization"].removeprefix("Bearer "))

    with pytest.raises(RemoteError) as raised:
        api.describe()
    assert raised.value.reason == "unauthorized"

    assert api.describe().hook_id == str(hook_id)


def test_an_app_whose_key_github_does_not_hold_is_unauthorized(fake, clock, app_key):
    _, public_key = app_key
    other_private_key, _ = rsa_key_pair()
    fake.add_app("123456", public_key, 4242)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, 1, credentials=app_credentials(other_private_key)).describe()

    assert (raised.value.reason, str(raised.value)) == (
        "unauthorized",
        "A JSON web token could not be decoded",
    )


def test_an_app_installed_elsewhere_is_not_found(fake, clock, app_key):
    private_key, public_key = app_key
    fake.add_app("123456", public_key, 4242)

    with pytest.raises(RemoteError) as raised:
        api_for(fake, clock, 1, credentials=app_credentials(private_key, "9999")).describe()

    assert raised.value.reason == "not_found"


def test_no_token_private_key_or_jwt_in_errors_or_logs(fake, clock, app_key, caplog):
    caplog.set_level(logging.DEBUG)
    private_key, public_key = app_key
    fake.add_app("123456", public_key, 4242)
    hook_id = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    app = api_for(fake, clock, hook_id, credentials=app_credentials(private_key))
    token = api_for(fake, clock, hook_id)
    errors = []
    for api, status in ((app, 401), (app, 500), (token, 401), (token, 403)):
        fake.script(status, path_contains="/hooks/")
        with pytest.raises(RemoteError) as raised:
            api.describe()
        errors.append(raised.value)
    fake.script(401, path_contains="access_tokens")
    clock.now += timedelta(hours=2)
    with pytest.raises(RemoteError) as raised:
        app.describe()
    errors.append(raised.value)

    bearers = {r.headers["authorization"].removeprefix("Bearer ") for r in fake.requests}
    jwts = {b for b in bearers if b.count(".") == 2}
    installation_tokens = {b for b in bearers if b.startswith("ghs_")}
    assert jwts and installation_tokens
    secrets = {TOKEN, *jwts, *installation_tokens, *private_key.strip().splitlines()[1:-1]}
    assert f"/{SCOPE}/hooks/" in caplog.text  # requests' and urllib3's own logs were kept
    shown = caplog.text + "".join(f"{e}{e!r}{e.args}" for e in errors) + repr(app) + repr(token)
    assert [s for s in secrets if s in shown] == []


# Credentials and places.


def test_credentials_are_a_token_or_an_apps_three_fields(app_key):
    provider = GitHubProvider()
    private_key, _ = app_key

    assert provider.check_credentials({"token": TOKEN}) == {"token": TOKEN}
    assert provider.check_credentials(app_credentials(private_key))["installation_id"] == "4242"
    assert set(provider.credential_fields) == {"token", "app_id", "private_key", "installation_id"}


@pytest.mark.parametrize(
    "values",
    [
        {"token": TOKEN, "app_id": "1"},
        {"app_id": "1", "private_key": "-----BEGIN"},
        {"token": ""},
        {"secret": TOKEN},
        {"app_id": "1", "private_key": "not a key " + TOKEN, "installation_id": "2"},
        {"app_id": "1", "private_key": "-----BEGIN", "installation_id": TOKEN},
    ],
    ids=["mixed", "missing", "empty", "unknown", "bad-key", "bad-installation"],
)
def test_other_credentials_are_refused_naming_fields_never_values(values):
    with pytest.raises(ValueError) as raised:
        GitHubProvider().check_credentials(values)
    assert TOKEN not in str(raised.value)
    assert "BEGIN" not in str(raised.value)


@pytest.mark.parametrize(
    "scope",
    [None, "repos/octo", "repos/a/b/c", "users/octo", "repos/../x", "orgs/..", "orgs/a b"],
)
def test_a_scope_is_a_repository_or_an_organisation(scope):
    with pytest.raises(ValueError):
        GitHubAPI({"token": TOKEN}, Place(scope=scope))


@pytest.mark.parametrize(
    ("api_url", "horizon"),
    [
        (None, timedelta(days=3)),
        ("https://api.github.com", timedelta(days=3)),
        ("https://github.example.com/api/v3", timedelta(days=7)),
    ],
)
def test_enterprise_server_reaches_back_seven_days_githubcom_three(api_url, horizon):
    api = GitHubProvider().remote({"token": TOKEN}, Place(api_url=api_url, scope=SCOPE))

    assert (api.family, api.horizon, api.page_size) == (PUSH, horizon, 100)


# The fake itself.

DELIVERY_ITEM_FIELDS = {
    "id",
    "guid",
    "delivered_at",
    "redelivery",
    "duration",
    "status",
    "status_code",
    "event",
    "action",
    "installation_id",
    "repository_id",
    "throttled_at",
}
RATE_LIMIT_HEADERS = {
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-ratelimit-used",
    "x-ratelimit-resource",
}


def test_the_fakes_answers_are_the_objects_of_githubs_description(fake, clock, app_key):
    """Read by githubkit's models, generated from GitHub's REST API description by a
    client hooklatch did not write."""
    from githubkit.compat import type_validate_python
    from githubkit_schemas.v2026_03_10 import models

    private_key, public_key = app_key
    fake.add_app("123456", public_key, 4242)
    repo_hook = fake.add_hook(SCOPE, RECEIVER_URL, secret=SECRET)
    org_hook = fake.add_hook("orgs/octo-org", RECEIVER_URL, secret=SECRET)
    fake.record(repo_hook, "guid-1", "issues", {"action": "opened"}, 200, clock.now)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {TOKEN}"

    def get(path):
        answer = session.get(fake.url + path, timeout=5)
        assert {name.lower() for name in answer.headers} >= RATE_LIMIT_HEADERS
        return answer

    type_validate_python(list[models.Hook], get(f"/{SCOPE}/hooks").json())
    type_validate_python(models.OrgHook, get(f"/orgs/octo-org/hooks/{org_hook}").json())
    items = get(f"/{SCOPE}/hooks/{repo_hook}/deliveries").json()
    type_validate_python(list[models.HookDeliveryItem], items)
    assert set(items[0]) == DELIVERY_ITEM_FIELDS
    delivery = get(f"/{SCOPE}/hooks/{repo_hook}/deliveries/{items[0]['id']}").json()
    type_validate_python(models.HookDelivery, delivery)
    missing = get(f"/{SCOPE}/hooks/{org_hook}")
    assert missing.status_code == 404
    type_validate_python(models.BasicError, missing.json())
    refused = session.post(f"{fake.url}/{SCOPE}/hooks", json={"config": {}}, timeout=5)
    assert refused.status_code == 422
    type_validate_python(models.ValidationError, refused.json())
    signed = app_jwt(app_credentials(private_key), now=clock.now)
    issued = requests.post(
        f"{fake.url}/app/installations/4242/access_tokens",
        headers={"Authorization": f"Bearer {signed}"},
        timeout=5,
    )
    assert issued.status_code == 201
    type_validate_python(models.InstallationToken, issued.json())


def test_githubs_ping_to_a_new_hook_verifies_with_the_secret_hooklatch_gave(clock, receiver):
    with FakeGitHub(clock=clock, ping_on_create=True) as fake:
        fake.add_token(TOKEN)
        registration = api_for(fake, clock).register(
            url=receiver.url, event_types=["push"], secret=SECRET
        )

    (ping,) = receiver.received
    delivery = Delivery(method="POST", url=receiver.url, headers=ping.headers, body=ping.body)
    GitHubProvider().verify(delivery, secrets=[SECRET], now=clock.now)
    assert ping.headers["x-github-event"] == "ping"
    assert ping.headers["x-github-hook-id"] == registration.hook_id
