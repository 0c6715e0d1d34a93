"""Keys are set at ingest, by the provider or the endpoint's own path, and only for an
endpoint that orders its events."""

from __future__ import annotations

import logging

from sqlalchemy import text

from hooklatch.providers.stripe import StripeProvider
from tests.support.pipeline import configure_ordering, make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_ordering_ingest"


def stored_key(client, runtime, endpoint, **extra):
    body = stripe_event(event_type="invoice.paid", **extra)
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    with runtime.engine.connect() as c:
        return c.execute(
            text("SELECT ordering_key, ordering_position FROM events WHERE id = :i"),
            {"i": response.json["events"][0]["id"]},
        ).one()


def test_an_unordered_endpoint_stores_no_key(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert tuple(stored_key(client, runtime, endpoint, customer="cus_1")) == (None, None)


def test_a_fifo_endpoint_stores_the_providers_key(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo")
    assert tuple(stored_key(client, runtime, endpoint, customer="cus_1")) == ("cus_1", 0)


def test_an_endpoints_key_path_replaces_the_providers_key(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(
        runtime,
        endpoint,
        policy="serial",
        key_path="data.object.metadata.account, data.object.customer",
    )
    with_account = stored_key(
        client, runtime, endpoint, customer="cus_1", metadata={"account": "acct_9"}
    )
    assert with_account.ordering_key == "acct_9"
    assert stored_key(client, runtime, endpoint, customer="cus_2").ordering_key == "cus_2"


def test_a_text_id_and_a_number_id_of_the_same_digits_are_stored_under_two_keys(client, runtime):
    """By the provider's key and by an endpoint's path alike; ids that were never
    ambiguous keep the key text they were stored under before."""
    by_provider, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, by_provider, policy="fifo")
    by_path, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, by_path, policy="serial", key_path="data.object.account")

    provider_keys = [
        stored_key(client, runtime, by_provider, customer=value).ordering_key
        for value in ("1", 1, "cus_123", 4711)
    ]
    path_keys = [
        stored_key(client, runtime, by_path, account=value).ordering_key
        for value in ("7", 7, "acct_9", 4711)
    ]

    assert provider_keys == ['"1"', "1", "cus_123", "4711"]
    assert path_keys == ['"7"', "7", "acct_9", "4711"]


def test_a_settings_change_reaches_a_web_process_that_cached_the_endpoint(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    assert stored_key(client, runtime, endpoint, customer="cus_1").ordering_key is None
    configure_ordering(runtime, endpoint, policy="fifo")  # the client's process cached it unordered
    assert stored_key(client, runtime, endpoint, customer="cus_1").ordering_key == "cus_1"
    configure_ordering(runtime, endpoint, policy="none")
    assert stored_key(client, runtime, endpoint, customer="cus_1").ordering_key is None


def test_a_plugin_whose_ordering_key_raises_keeps_the_event_unkeyed(
    client, runtime, monkeypatch, caplog
):
    def broken(self, event):
        raise KeyError("data")

    monkeypatch.setattr(StripeProvider, "ordering_key", broken)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    configure_ordering(runtime, endpoint, policy="fifo")
    with caplog.at_level(logging.ERROR):
        assert stored_key(client, runtime, endpoint, customer="cus_1").ordering_key is None
    assert "ordering_key raised" in caplog.text
