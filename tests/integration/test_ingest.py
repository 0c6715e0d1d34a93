"""POST /hooks/<id>: signed by the providers' SDKs, refused cleanly, stored once."""

import json
import time

import pytest

from tests.support.database import count
from tests.support.pipeline import make_endpoint
from tests.support.signing import github_headers, stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def rows(runtime):
    return count(runtime, "SELECT count(*) FROM events")


def test_stripe_request_signed_by_stripe_sdk_is_stored_once(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_accept_1")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    assert response.json["status"] == "accepted"
    assert response.json["events"][0]["external_id"] == "evt_accept_1"
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql(
            "SELECT body, type, status, provider FROM events WHERE external_id = 'evt_accept_1'"
        ).one()
    assert bytes(stored.body) == body  # the exact bytes received
    assert (stored.type, stored.status, stored.provider) == ("invoice.paid", "pending", "stripe")
    assert count(runtime, "SELECT count(*) FROM outbox") == 1


def test_github_request_signed_by_githubkit_is_stored_under_its_delivery_id(client, runtime):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    body = json.dumps({"action": "opened", "issue": {"number": 1}}).encode()
    headers = github_headers(body, "gh-secret", event="issues", delivery="delivery-42")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        stored = c.exec_driver_sql("SELECT external_id, type FROM events").one()
    assert tuple(stored) == ("delivery-42", "issues.opened")


def test_github_ping_at_registration_is_acknowledged(client, runtime):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    body = json.dumps({"zen": "Design for failure.", "hook_id": 1}).encode()
    response = client.post(
        f"/hooks/{endpoint}", data=body, headers=github_headers(body, "gh-secret", event="ping")
    )
    assert response.status_code == 200
    assert response.json["status"] == "accepted"


def test_repeated_delivery_answers_duplicate_and_stores_nothing_more(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_dup")
    first = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    second = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (first.status_code, second.status_code) == (200, 200)
    assert second.json["status"] == "duplicate"
    assert second.json["events"][0]["id"] == first.json["events"][0]["id"]
    assert rows(runtime) == 1
    assert count(runtime, "SELECT count(*) FROM outbox") == 1


def test_same_event_id_with_another_body_is_recorded_as_a_mismatch(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    for amount in (1, 2):
        body = stripe_event("evt_mismatch", amount=amount)
        response = client.post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
        )
        assert response.status_code == 200
    assert count(runtime, "SELECT mismatched_duplicates FROM events") == 1


def _stripe_cases():
    now = int(time.time())
    good = stripe_event("evt_refused")

    def tampered():
        headers = stripe_headers(good, SECRET)
        return good.replace(b"2000", b"9000"), headers

    return {
        "tampered_body": (tampered, 401, "bad_signature"),
        "wrong_secret": (lambda: (good, stripe_headers(good, "whsec_other")), 401, "bad_signature"),
        "missing_header": (
            lambda: (good, {"Content-Type": "application/json"}),
            400,
            "missing_header",
        ),
        "malformed_header": (
            lambda: (good, {"Stripe-Signature": "v1=abc"}),
            400,
            "malformed_header",
        ),
        "six_minutes_old": (
            lambda: (good, stripe_headers(good, SECRET, timestamp=now - 360)),
            401,
            "stale_timestamp",
        ),
        "six_minutes_ahead": (
            lambda: (good, stripe_headers(good, SECRET, timestamp=now + 360)),
            401,
            "future_timestamp",
        ),
    }


@pytest.mark.parametrize("case", list(_stripe_cases()))
def test_refused_stripe_request_leaves_no_row(client, runtime, case):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    build, status, reason = _stripe_cases()[case]
    body, headers = build()
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert response.status_code == status
    assert response.json["error"] == reason
    assert rows(runtime) == 0
    assert count(runtime, "SELECT count(*) FROM outbox") == 0


def _without(headers, name):
    return {k: v for k, v in headers.items() if k != name}


def _github_cases():
    good = json.dumps({"ref": "refs/heads/main"}).encode()
    return {
        "tampered_body": (
            lambda: (good + b" ", github_headers(good, "gh-secret")),
            401,
            "bad_signature",
        ),
        "wrong_secret": (lambda: (good, github_headers(good, "nope")), 401, "bad_signature"),
        "missing_signature": (
            lambda: (good, _without(github_headers(good, "gh-secret"), "X-Hub-Signature-256")),
            400,
            "missing_header",
        ),
        "missing_delivery": (
            lambda: (good, _without(github_headers(good, "gh-secret"), "X-GitHub-Delivery")),
            400,
            "missing_header",
        ),
        "sha1_only": (lambda: (good, {"X-Hub-Signature-256": "sha1=abc"}), 400, "malformed_header"),
    }


@pytest.mark.parametrize("case", list(_github_cases()))
def test_refused_github_request_leaves_no_row(client, runtime, case):
    endpoint, _ = make_endpoint(runtime, "github", secrets=["gh-secret"])
    build, status, reason = _github_cases()[case]
    body, headers = build()
    response = client.post(f"/hooks/{endpoint}", data=body, headers=headers)
    assert (response.status_code, response.json["error"]) == (status, reason)
    assert rows(runtime) == 0


def test_valid_signature_over_a_body_that_is_not_an_event_is_refused(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = b'["not", "an", "event"]'
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
    assert rows(runtime) == 0


def test_body_over_the_limit_is_refused_before_it_is_read(settings, router):
    from hooklatch import create_app

    small = create_app(
        settings.__class__(**{**settings.__dict__, "max_body_bytes": 64}), router=router
    )
    endpoint, _ = make_endpoint(small.extensions["hooklatch"], "stripe", secrets=[SECRET])
    body = stripe_event("evt_big")
    response = small.test_client().post(
        f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET)
    )
    assert response.json is not None
    assert (response.status_code, response.json["error"]) == (413, "body_too_large")
    assert rows(small.extensions["hooklatch"]) == 0
    small.extensions["hooklatch"].dispose()


def test_unknown_and_disabled_endpoints_answer_404(client, runtime):
    from hooklatch.endpoints.models import Endpoint

    body = stripe_event()
    assert (
        client.post("/hooks/ep_nope", data=body, headers=stripe_headers(body, SECRET)).status_code
        == 404
    )
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    with runtime.session_factory.begin() as session:
        session.get(Endpoint, endpoint).enabled = False
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (response.status_code, response.json["error"]) == (404, "unknown_endpoint")
    assert rows(runtime) == 0


def test_refusal_log_names_the_reason_but_never_the_secret(client, runtime, caplog):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event()
    client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, "whsec_other"))
    text = caplog.text
    assert "bad_signature" in text
    assert SECRET not in text and "whsec_other" not in text


# -- the endpoint cache: one round trip per delivery, never a stale answer ------------
