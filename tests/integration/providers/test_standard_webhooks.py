"""Standard Webhooks through the real endpoint: the svix- headers, Supabase's secret form,
mixed and unreadable signature lists, missing headers, secrets that are not keys, and the
stored event type."""

from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from tests.support.database import count
from tests.support.pipeline import make_endpoint, post_json
from tests.support.providers.standard_webhooks import ed25519_pair, event, signed, v1a
from tests.support.signing import whsec


def test_svix_headers_are_accepted_and_deduplicated_on_svix_id(client, runtime):
    secret = whsec("svix")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event("invoice.paid")
    first = post_json(
        client, endpoint, body, signed(secret, body, message_id="msg_svix", prefix="svix")
    )
    again = post_json(
        client, endpoint, body, signed(secret, body, message_id="msg_svix", prefix="svix")
    )
    assert first.status_code == 200, first.json
    assert first.json["events"][0]["external_id"] == "msg_svix"
    assert again.json["status"] == "duplicate"
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == "invoice.paid"


def test_supabase_secret_form_is_accepted_through_the_endpoint(client, runtime):
    secret = whsec("supabase")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=["v1," + secret])
    body = event("before-user-created")
    response = post_json(client, endpoint, body, signed(secret, body))
    assert response.status_code == 200, response.json


def test_v1a_is_accepted_next_to_a_v1_entry_from_an_unknown_secret(client, runtime):
    public, private = ed25519_pair("mixed")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[public])
    body, now = event(), datetime.now(UTC)
    headers = signed(whsec("someone-else"), body, now=now)
    headers["webhook-signature"] += " " + v1a(private, "msg_1", now, body)
    response = post_json(client, endpoint, body, headers)
    assert response.status_code == 200, response.json


def test_a_garbage_entry_in_the_list_still_verifies_through_the_good_one(client, runtime):
    secret = whsec("garbage")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = signed(secret, body)
    good = headers["webhook-signature"]
    headers["webhook-signature"] = f"v1,not*base64! nocomma v1,{'A' * 43}= v2,abc {good}"
    # The reference library raises on the first bad entry instead of reading on.
    with pytest.raises(ValueError):  # binascii.Error is a ValueError
        Webhook(secret).verify(body, headers)
    response = post_json(client, endpoint, body, headers)
    assert response.status_code == 200, response.json


@pytest.mark.parametrize("header", ["nocomma", "v1,@@@@ v1a,", "v2,abc", "v1,"])
def test_a_signature_header_with_no_readable_entry_is_malformed(client, runtime, header):
    secret = whsec("unreadable")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = {**signed(secret, body), "webhook-signature": header}
    response = post_json(client, endpoint, body, headers)
    assert (response.status_code, response.json["error"]) == (400, "malformed_header")
    assert count(runtime, "SELECT count(*) FROM events") == 0


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp"])
def test_a_missing_id_or_timestamp_header_is_refused(client, runtime, missing):
    secret = whsec("missing")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    body = event()
    headers = {k: v for k, v in signed(secret, body).items() if k != missing}
    response = post_json(client, endpoint, body, headers)
    assert (response.status_code, response.json["error"]) == (400, "missing_header")


def test_an_endpoint_whose_secret_is_not_a_key_says_so(client, runtime):
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=["not a whsec secret!"])
    body = event()
    response = post_json(client, endpoint, body, signed(whsec("any"), body))
    assert (response.status_code, response.json["error"]) == (401, "no_secret")


@pytest.mark.parametrize(
    ("body", "event_type"),
    [
        (b'{"type":"email.sent","data":{}}', "email.sent"),
        (b'{"data":{}}', "webhook"),
        (b"[1]", "webhook"),
    ],
)
def test_the_event_type_is_the_body_type_or_webhook(client, runtime, body, event_type):
    secret = whsec("types")
    endpoint, _ = make_endpoint(runtime, "standard-webhooks", secrets=[secret])
    response = post_json(client, endpoint, body, signed(secret, body))
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        assert c.exec_driver_sql("SELECT type FROM events").scalar_one() == event_type
