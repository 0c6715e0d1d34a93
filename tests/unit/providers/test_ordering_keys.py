"""Each built-in provider's ordering key (the entity an event changes) and position (how new
that entity's state is), read from payloads shaped as each sender sends them. The events
are built as ingest builds them: ``parse`` gives the type and time, ``payload`` the body."""

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from hooklatch.providers.base import (
    MAX_ORDERING_KEY_LENGTH,
    Delivery,
    Provider,
    key_text,
    position_of,
)
from hooklatch.providers.github import GitHubProvider
from hooklatch.providers.linear import LinearProvider
from hooklatch.providers.loading import load_providers
from hooklatch.providers.paddle import PaddleProvider
from hooklatch.providers.shopify import ShopifyProvider
from hooklatch.providers.stripe import StripeProvider

STRIPE, PADDLE, SHOPIFY = StripeProvider(), PaddleProvider(), ShopifyProvider()
GITHUB, LINEAR = GitHubProvider(), LinearProvider()
KEYED = {"stripe": STRIPE, "paddle": PADDLE, "shopify": SHOPIFY, "github": GITHUB, "linear": LINEAR}
URL = "https://hooks.example.test/h"


@dataclass(frozen=True)
class Event:
    type: str
    payload: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    occurred_at: datetime | None = None


def received(provider: Provider, payload: Any, headers: Mapping[str, str] | None = None) -> Event:
    lowered = {name.lower(): value for name, value in (headers or {}).items()}
    body = json.dumps(payload).encode()
    [parsed] = provider.parse(Delivery("POST", URL, lowered, body))
    return Event(parsed.type, provider.payload(lowered, body), lowered, parsed.occurred_at)


def at(text: str) -> int | None:
    return position_of(datetime.fromisoformat(text))


def known(position: int | None) -> int:
    assert position is not None
    return position


# Stripe


def stripe_event(event_id: str, event_type: str, created: int, subject: dict) -> Event:
    payload = {
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "livemode": False,
        "pending_webhooks": 1,
        "type": event_type,
        "data": {"object": subject},
    }
    return received(STRIPE, payload)


def subscription(status: str) -> dict:
    return {
        "id": "sub_1PgQx2LkdIwHu7ixZ3aB9cDe",
        "object": "subscription",
        "customer": "cus_QXy7ab12CdEf34",
        "status": status,
        "items": {"object": "list", "data": [{"id": "si_QXy7", "price": {"id": "price_1"}}]},
        "latest_invoice": "in_1PgQx3LkdIwHu7ixAbCdEfGh",
    }


def test_stripe_subscription_created_and_updated_share_the_customer_key_and_updated_is_newer():
    created = stripe_event(
        "evt_1PgQx4", "customer.subscription.created", 1722000000, subscription("incomplete")
    )
    updated = stripe_event(
        "evt_1PgQx9", "customer.subscription.updated", 1722000003, subscription("active")
    )

    assert STRIPE.ordering_key(created) == STRIPE.ordering_key(updated) == "cus_QXy7ab12CdEf34"
    assert known(STRIPE.ordering_position(updated)) > known(STRIPE.ordering_position(created))


def test_stripe_customer_event_is_keyed_by_the_customer_own_id():
    customer = {"id": "cus_QXy7ab12CdEf34", "object": "customer", "email": "a@example.com"}
    event = stripe_event("evt_1PgQx1", "customer.created", 1722000000, customer)

    assert STRIPE.ordering_key(event) == "cus_QXy7ab12CdEf34"


@pytest.mark.parametrize(
    ("subject", "key"),
    [
        (
            {"id": "in_1", "object": "invoice", "customer": None, "subscription": "sub_9"},
            "sub_9",
        ),
        ({"id": "pi_3PgQ", "object": "payment_intent", "customer": None}, "pi_3PgQ"),
        ({"id": "prod_Q1", "object": "product", "name": "Pro"}, "prod_Q1"),
    ],
)
def test_stripe_object_without_customer_is_keyed_by_its_subscription_else_its_own_id(subject, key):
    event = stripe_event("evt_1", "x.updated", 1722000000, subject)

    assert STRIPE.ordering_key(event) == key


def test_stripe_events_of_one_second_have_equal_positions_microseconds_since_the_epoch():
    first = stripe_event("evt_a", "invoice.created", 1722000000, {"id": "in_1", "customer": "c"})
    second = stripe_event("evt_b", "invoice.finalized", 1722000000, {"id": "in_1", "customer": "c"})

    assert STRIPE.ordering_position(first) == STRIPE.ordering_position(second)
    assert STRIPE.ordering_position(first) == 1722000000 * 1_000_000


# Paddle


def paddle_event(event_id: str, event_type: str, occurred: str, status: str) -> Event:
    payload = {
        "event_id": event_id,
        "event_type": event_type,
        "occurred_at": occurred,
        "notification_id": "ntf_01j3x6vdq5bk0c6v3n6rgmyd3c",
        "data": {
            "id": "txn_01j3x6t1e0zm4bnpzjm1xf2y5c",
            "status": status,
            "customer_id": "ctm_01j3x6p8d2yq7a5hc0t2mzrk9w",
            "subscription_id": None,
            "currency_code": "EUR",
            "updated_at": occurred,
        },
    }
    return received(PADDLE, payload)


def test_paddle_transaction_updated_arriving_after_completed_has_its_key_and_an_older_position():
    completed = paddle_event(
        "evt_01j3x6w0c9", "transaction.completed", "2024-07-24T10:05:02.481203Z", "completed"
    )
    updated = paddle_event(
        "evt_01j3x6vz7k", "transaction.updated", "2024-07-24T10:05:01.993410Z", "paid"
    )

    assert PADDLE.ordering_key(updated) == PADDLE.ordering_key(completed)
    assert PADDLE.ordering_key(completed) == "txn_01j3x6t1e0zm4bnpzjm1xf2y5c"
    assert known(PADDLE.ordering_position(updated)) < known(PADDLE.ordering_position(completed))


def test_paddle_position_is_occurred_at_to_the_microsecond():
    event = paddle_event("evt_1", "transaction.paid", "2024-07-24T10:05:01.993410Z", "paid")

    assert PADDLE.ordering_position(event) == at("2024-07-24T10:05:01.993410+00:00")


# Shopify


def shopify_event(topic: str, payload: dict, *, triggered_at="2024-07-24T10:05:09.118Z"):
    headers = {
        "X-Shopify-Topic": topic,
        "X-Shopify-Shop-Domain": "example.myshopify.com",
        "X-Shopify-API-Version": "2025-01",
        "X-Shopify-Webhook-Id": "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        "X-Shopify-Event-Id": "98880550-7158-44d4-b7cd-2c97c8a091b5",
        "X-Shopify-Triggered-At": triggered_at,
    }
    return received(SHOPIFY, payload, headers)


def order(financial_status: str, updated_at: str) -> dict:
    return {
        "id": 5710512676931,
        "admin_graphql_api_id": "gid://shopify/Order/5710512676931",
        "name": "#1042",
        "financial_status": financial_status,
        "total_price": "48.00",
        "created_at": "2024-07-24T12:04:58+02:00",
        "updated_at": updated_at,
    }


def test_shopify_orders_create_and_paid_of_one_order_share_a_key():
    created = shopify_event("orders/create", order("pending", "2024-07-24T12:04:59+02:00"))
    paid = shopify_event("orders/paid", order("paid", "2024-07-24T12:05:07+02:00"))

    assert SHOPIFY.ordering_key(created) == SHOPIFY.ordering_key(paid) == "orders/5710512676931"
    assert known(SHOPIFY.ordering_position(paid)) > known(SHOPIFY.ordering_position(created))


def test_shopify_order_delete_whose_body_is_only_the_id_shares_the_orders_key():
    deleted = shopify_event("orders/delete", {"id": 5710512676931})
    paid = shopify_event("orders/paid", order("paid", "2024-07-24T12:05:07+02:00"))

    assert SHOPIFY.ordering_key(deleted) == SHOPIFY.ordering_key(paid)


def test_shopify_resources_of_the_same_id_get_different_keys():
    product = shopify_event("products/update", {"id": 5710512676931, "title": "Mug"})

    assert SHOPIFY.ordering_key(product) == "products/5710512676931"


def test_shopify_position_is_updated_at_which_a_retry_keeps_rather_than_its_trigger_time():
    first = shopify_event("orders/updated", order("paid", "2024-07-24T12:05:07+02:00"))
    retried = shopify_event(
        "orders/updated",
        order("paid", "2024-07-24T12:05:07+02:00"),
        triggered_at="2024-07-24T10:35:09.118Z",
    )

    assert SHOPIFY.ordering_position(retried) == SHOPIFY.ordering_position(first)
    assert SHOPIFY.ordering_position(first) == at("2024-07-24T10:05:07+00:00")


def test_shopify_body_without_updated_at_is_placed_at_its_trigger_time():
    deleted = shopify_event(
        "orders/delete", {"id": 5710512676931}, triggered_at="2024-07-24T10:09:00.5Z"
    )

    assert SHOPIFY.ordering_position(deleted) == at("2024-07-24T10:09:00.500000+00:00")


def test_shopify_topic_without_a_resource_gives_no_key():
    assert SHOPIFY.ordering_key(Event("orders", {"id": 1})) is None
    assert SHOPIFY.ordering_key(Event("/paid", {"id": 1})) is None


# GitHub

REPOSITORY = {"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "full_name": "octo/hello"}
PULL_REQUEST = {
    "id": 1934845123,
    "node_id": "PR_kwDOABE2Rc5zUxnD",
    "number": 1347,
    "state": "open",
    "title": "Amazing new feature",
    "updated_at": "2024-07-24T10:00:00Z",
}


def github_event(event: str, payload: dict) -> Event:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    }
    return received(GITHUB, {**payload, "repository": REPOSITORY}, headers)


def test_github_pull_request_its_review_and_a_comment_on_it_share_the_repository_and_number():
    opened = github_event("pull_request", {"action": "opened", "pull_request": PULL_REQUEST})
    review = github_event(
        "pull_request_review",
        {"action": "submitted", "review": {"id": 80}, "pull_request": PULL_REQUEST},
    )
    # GitHub sends a comment on a pull request as an issue_comment whose issue is the PR.
    issue = {
        "node_id": "I_kwDOABE2Rc6AbCdE",
        "number": 1347,
        "pull_request": {"url": "https://api.github.com/repos/octo/hello/pulls/1347"},
        "updated_at": "2024-07-24T10:02:00Z",
    }
    comment = github_event(
        "issue_comment", {"action": "created", "issue": issue, "comment": {"id": 7}}
    )

    keys = {GITHUB.ordering_key(event) for event in (opened, review, comment)}
    assert keys == {"octo/hello#1347"}


def test_github_position_is_the_subjects_updated_at():
    later = {**PULL_REQUEST, "state": "closed", "updated_at": "2024-07-24T11:30:00Z"}
    closed = github_event("pull_request", {"action": "closed", "pull_request": later})
    opened = github_event("pull_request", {"action": "opened", "pull_request": PULL_REQUEST})

    assert GITHUB.ordering_position(closed) == at("2024-07-24T11:30:00+00:00")
    assert known(GITHUB.ordering_position(opened)) < known(GITHUB.ordering_position(closed))


def test_github_workflow_run_is_keyed_by_its_node_id():
    run = {"id": 30433642, "node_id": "WFR_kwLOABE2Rc4BzGra", "status": "completed"}
    event = github_event("workflow_run", {"action": "completed", "workflow_run": run})

    assert GITHUB.ordering_key(event) == "WFR_kwLOABE2Rc4BzGra"
    assert GITHUB.ordering_position(event) is None  # no updated_at, and no event time


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        ("push", {"ref": "refs/heads/main", "after": "6113728f27ae82c7b1a177c8d03f9e96e0adf246"}),
        ("ping", {"zen": "Keep it logically awesome.", "hook_id": 1}),
        ("star", {"action": "created", "starred_at": "2024-07-24T10:00:00Z"}),
    ],
)
def test_github_events_about_no_subject_have_no_key(event, payload):
    assert GITHUB.ordering_key(github_event(event, payload)) is None


# Linear

ISSUE_ID = "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9"


def linear_event(action: str, created: str, data: dict, *, sent_at: int = 1721815501000):
    payload = {
        "action": action,
        "type": "Issue",
        "createdAt": created,
        "data": {"id": ISSUE_ID, "identifier": "ENG-42", "title": "Crash on save", **data},
        "url": "https://linear.app/acme/issue/ENG-42",
        "organizationId": "a3f9b2c1-5d6e-4f70-8a9b-0c1d2e3f4a5b",
        "webhookId": "5c2a8a8e-6a1b-4f6e-9c55-3f0b2f2e9d11",
        "webhookTimestamp": sent_at,
    }
    return received(LINEAR, payload, {"Linear-Event": "Issue"})


def test_linear_issue_create_and_update_share_the_issue_id_and_the_update_is_newer():
    created = linear_event(
        "create", "2024-07-24T10:00:00.120Z", {"updatedAt": "2024-07-24T10:00:00.120Z"}
    )
    updated = linear_event(
        "update", "2024-07-24T10:04:31.877Z", {"updatedAt": "2024-07-24T10:04:31.877Z"}
    )

    assert LINEAR.ordering_key(created) == LINEAR.ordering_key(updated) == ISSUE_ID
    assert known(LINEAR.ordering_position(updated)) > known(LINEAR.ordering_position(created))


def test_linear_position_is_data_updated_at_before_the_event_time():
    data = {"updatedAt": "2024-07-24T10:04:31.877Z"}
    event = linear_event("update", "2024-07-24T10:04:32.000Z", data)

    assert LINEAR.ordering_position(event) == at("2024-07-24T10:04:31.877000+00:00")


def test_linear_without_updated_at_a_retry_keeps_the_event_time_not_the_attempt_time():
    first = linear_event("remove", "2024-07-24T10:04:31.877Z", {}, sent_at=1721815472000)
    retry = linear_event("remove", "2024-07-24T10:04:31.877Z", {}, sent_at=1721819072000)

    assert LINEAR.ordering_position(retry) == LINEAR.ordering_position(first)
    assert LINEAR.ordering_position(first) == at("2024-07-24T10:04:31.877000+00:00")


def test_linear_with_no_other_time_is_placed_at_webhook_timestamp_milliseconds():
    event = Event("Issue.update", {"data": {"id": ISSUE_ID}, "webhookTimestamp": 1721815471877})

    assert LINEAR.ordering_position(event) == 1721815471877 * 1000


# Hostile payloads: no key, and no position of their own, never an exception

NOT_OBJECTS = [None, [], [{"data": {"id": "x"}}], "txn_1", 42, True, 1.5]
HUGE = json.loads("9" * 4300)  # the longest integer JSON decoding gives


@pytest.mark.parametrize("payload", NOT_OBJECTS, ids=repr)
@pytest.mark.parametrize("name", sorted(KEYED))
def test_payload_that_is_not_an_object_gives_no_key_and_no_position(name, payload):
    provider = KEYED[name]
    event_type = {"shopify": "orders/paid", "github": "pull_request.opened"}.get(name, "x.y")
    event = Event(event_type, payload)

    assert provider.ordering_key(event) is None
    assert provider.ordering_position(event) is None


WRONG_IDS = [None, True, 1.5, HUGE, "", "x" * (MAX_ORDERING_KEY_LENGTH + 1), "a\x00b", "\ud800"]
WRONG_IDS += [["cus_1"], {"id": "cus_1"}]


@pytest.mark.parametrize("value", WRONG_IDS, ids=lambda value: repr(value)[:20])
@pytest.mark.parametrize(
    ("name", "event_type", "place"),
    [
        ("stripe", "customer.updated", lambda v: {"data": {"object": {"customer": v}}}),
        ("stripe", "product.updated", lambda v: {"data": {"object": {"id": v}}}),
        ("paddle", "transaction.updated", lambda v: {"data": {"id": v}}),
        ("shopify", "orders/paid", lambda v: {"id": v}),
        ("github", "workflow_run.completed", lambda v: {"workflow_run": {"node_id": v}}),
        (
            "github",
            "issues.opened",
            lambda v: {"issue": {"number": v}, "repository": {"full_name": "octo/hello"}},
        ),
        (
            "github",
            "issues.opened",
            lambda v: {"issue": {"number": 3}, "repository": {"full_name": v}},
        ),
        ("linear", "Issue.update", lambda v: {"data": {"id": v}}),
    ],
)
def test_an_id_that_is_not_storable_text_gives_no_key(name, event_type, place, value):
    assert KEYED[name].ordering_key(Event(event_type, place(value))) is None


PLACES = [
    ("stripe", "customer.updated", lambda v: {"data": {"object": {"customer": v}}}),
    ("stripe", "product.updated", lambda v: {"data": {"object": {"id": v}}}),
    ("paddle", "transaction.updated", lambda v: {"data": {"id": v}}),
    ("shopify", "orders/paid", lambda v: {"id": v}),
    ("github", "workflow_run.completed", lambda v: {"workflow_run": {"node_id": v}}),
    ("linear", "Issue.update", lambda v: {"data": {"id": v}}),
]


@pytest.mark.parametrize(("name", "event_type", "place"), PLACES)
@pytest.mark.parametrize(("text", "number"), [("1", 1), ("4711", 4711), ("-3", -3)])
def test_an_id_sent_as_text_and_the_same_digits_sent_as_a_number_are_two_keys(
    name, event_type, place, text, number
):
    """Two entities: a payload's "1" and 1 must not share ordering."""
    as_text = KEYED[name].ordering_key(Event(event_type, place(text)))
    as_number = KEYED[name].ordering_key(Event(event_type, place(number)))

    assert as_text is not None and as_number is not None
    assert as_text != as_number


@pytest.mark.parametrize(
    ("name", "event_type", "place", "value", "key"),
    [
        (*PLACES[0], "cus_QXy7ab12CdEf34", "cus_QXy7ab12CdEf34"),
        (*PLACES[2], "txn_01j3x6t1e0zm4bnpzjm1xf2y5c", "txn_01j3x6t1e0zm4bnpzjm1xf2y5c"),
        (*PLACES[3], 5710512676931, "orders/5710512676931"),
        (*PLACES[4], "WFR_kwLOABE2Rc4BzGra", "WFR_kwLOABE2Rc4BzGra"),
        (
            *PLACES[5],
            "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9",
            "2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9",
        ),
        (*PLACES[5], 4711, "4711"),
        (*PLACES[5], "1e", "1e"),
        (*PLACES[5], "12 34", "12 34"),
        (*PLACES[5], "[1]", "[1]"),
    ],
)
def test_a_key_that_was_not_ambiguous_is_stored_as_it_was(name, event_type, place, value, key):
    """Events waiting under today's keys keep their order with those that follow."""
    assert KEYED[name].ordering_key(Event(event_type, place(value))) == key


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("1", '"1"'),
        ("-3", '"-3"'),
        ("1.5", '"1.5"'),
        ("1e3", '"1e3"'),
        ("true", '"true"'),
        ("null", '"null"'),
        (" 7 ", '" 7 "'),
        ('"1"', '"\\"1\\""'),
        ("Ünïcode", "Ünïcode"),
    ],
)
def test_text_that_reads_as_another_json_value_is_keyed_as_a_json_string(value, key):
    assert key_text(value) == key


def test_every_form_of_one_value_gives_its_own_key():
    values = [1, "1", '"1"', '"\\"1\\""', "true", '"true"', -3, "-3", "1.0", "01"]
    keys = [key_text(value) for value in values]

    assert None not in keys
    assert len(set(keys)) == len(values), keys


def test_text_that_reads_as_a_json_value_and_is_too_long_once_quoted_gives_no_key():
    digits = "9" * MAX_ORDERING_KEY_LENGTH

    assert key_text(digits) is None
    assert key_text(int(digits)) == digits


@pytest.mark.parametrize("number", [0, -3, 2**63, HUGE])
def test_github_number_that_is_not_a_count_gives_no_key(number):
    payload = {"issue": {"number": number}, "repository": {"full_name": "octo/hello"}}

    assert GITHUB.ordering_key(Event("issues.opened", payload)) is None


NOT_TIMES = [None, True, 1722000000, HUGE, "yesterday", "9999-12-31T23:59:59-05:00", ["x"]]


@pytest.mark.parametrize("value", NOT_TIMES, ids=lambda value: repr(value)[:20])
@pytest.mark.parametrize(
    ("name", "event_type", "place"),
    [
        ("shopify", "orders/paid", lambda v: {"id": 1, "updated_at": v}),
        ("github", "issues.edited", lambda v: {"issue": {"number": 1, "updated_at": v}}),
        ("linear", "Issue.update", lambda v: {"data": {"id": "i", "updatedAt": v}}),
    ],
)
def test_a_time_that_is_not_one_falls_back_to_the_event_time(name, event_type, place, value):
    occurred = datetime(2024, 7, 24, 10, 0, tzinfo=UTC)
    event = Event(event_type, place(value), occurred_at=occurred)

    assert KEYED[name].ordering_position(event) == position_of(occurred)


@pytest.mark.parametrize("stamp", [True, "1721815471877", HUGE, -(10**20), 1e300])
def test_linear_webhook_timestamp_that_is_not_a_time_gives_no_position(stamp):
    event = Event("Issue.update", {"data": {"id": ISSUE_ID}, "webhookTimestamp": stamp})

    assert LINEAR.ordering_position(event) is None


def test_other_built_in_providers_key_nothing():
    payload = {"id": "evt_1", "data": {"id": "x", "object": {"id": "y", "customer": "z"}}}
    others = {name: p for name, p in load_providers().items() if name not in KEYED}

    assert others
    assert all(p.ordering_key(Event("x.y", payload)) is None for p in others.values())
