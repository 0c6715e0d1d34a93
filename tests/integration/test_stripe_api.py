"""Stripe's API through StripeAPI (stripe-python's client), against a local server that
answers as Stripe's API description says (tests/support/fake_stripe.py)."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import stripe

from hooklatch.errors import VerificationError
from hooklatch.providers import remote
from hooklatch.providers.base import Delivery
from hooklatch.providers.remote import Place, RemoteError
from hooklatch.providers.stripe import StripeProvider
from hooklatch.providers.stripe_api import StripeAPI
from tests.support.fake_stripe import EVENTS_READ, FakeStripe
from tests.support.local_http import Answer, Incoming, LocalServer
from tests.support.processes import free_port

KEY = "rk_test_51HhooklatchRestrictedKeyZq9X"
LAST_4 = KEY[-4:]
DAY = 24 * 3600


class Receiver(LocalServer):
    """Where Stripe delivers: checks each delivery with StripeProvider.verify and the
    secret it is given, answers 200, or 400 to a signature that does not verify."""

    def __init__(self) -> None:
        self.secret = ""
        self.refused: list[VerificationError] = []
        self.received: list[bytes] = []
        super().__init__(self._verify)

    def _verify(self, incoming: Incoming) -> Answer:
        delivery = Delivery("POST", self.url, incoming.headers, incoming.body)
        try:
            StripeProvider().verify(delivery, secrets=[self.secret], now=datetime.now(UTC))
        except VerificationError as error:
            self.refused.append(error)
            return Answer(400)
        self.received.append(incoming.body)
        return Answer(200)


@pytest.fixture
def fake() -> Iterator[FakeStripe]:
    with FakeStripe() as server:
        server.add_key(KEY)
        yield server


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as server:
        yield server


def api_for(fake: FakeStripe, hook_id: str | None = None) -> StripeAPI:
    remote = StripeProvider().remote({"api_key": KEY}, Place(api_url=fake.url, hook_id=hook_id))
    assert isinstance(remote, StripeAPI)
    return remote


def events_listed(fake: FakeStripe) -> list:
    return [request for request in fake.requests if request.path == "/v1/events"]


def test_stripe_api_is_a_pull_api_reaching_back_30_days_100_events_a_page():
    assert (StripeAPI.family, StripeAPI.horizon, StripeAPI.page_size) == (
        remote.PULL,
        timedelta(days=30),
        100,
    )


def test_events_since_a_time_come_in_pages_of_100_newest_first(fake):
    now = int(time.time())
    since = datetime.fromtimestamp(now - 1000, UTC)
    before = [
        fake.create_event("invoice.paid", {"id": f"in_old_{i}"}, now - 2000) for i in range(5)
    ]
    made = [
        fake.create_event("invoice.paid", {"id": f"in_{i}"}, now - 999 + i * 3) for i in range(250)
    ]
    api = api_for(fake)

    pages, token = [], None
    while True:
        page = api.events_page(since=since, only_failed=False, token=token)
        pages.append(page)
        token = page.next_token
        if token is None:
            break

    assert [len(page.items) for page in pages] == [100, 100, 50]
    assert [page.next_token for page in pages] == [
        pages[0].items[-1].external_id,
        pages[1].items[-1].external_id,
        None,
    ]
    items = [item for page in pages for item in page.items]
    assert [item.external_id for item in items] == [str(event["id"]) for event in reversed(made)]
    assert not {str(event["id"]) for event in before} & {item.external_id for item in items}
    assert items[0].created == datetime.fromtimestamp(now - 999 + 249 * 3, UTC)
    assert items[0].created.tzinfo is not None
    # Each item is the event as a webhook carries it: the provider reads it as a delivery.
    assert json.loads(items[0].body) == fake.event(items[0].external_id)
    parsed = StripeProvider().parse(Delivery("POST", "https://h/x", {}, items[0].body))
    assert (parsed[0].external_id, parsed[0].type) == (items[0].external_id, "invoice.paid")
    asked = events_listed(fake)
    assert [request.params.get("starting_after") for request in asked] == [
        None,
        pages[0].next_token,
        pages[1].next_token,
    ]
    assert {request.params["created[gte]"] for request in asked} == {str(now - 1000)}
    assert {request.params["limit"] for request in asked} == {"100"}
    assert not any("delivery_success" in request.params for request in asked)


def test_only_failed_lists_events_never_delivered_and_those_only_refused(fake, receiver):
    api = api_for(fake)
    registration = api.register(url=receiver.url, event_types=["invoice.paid"])
    receiver.secret = str(registration.secret)
    events = [str(fake.create_event("invoice.paid", {"id": f"in_{i}"})["id"]) for i in range(10)]
    for event_id in events[:4]:
        assert fake.deliver(event_id, registration.hook_id) == 200
    # Refused for a wrong secret: twice, and once more before it went through.
    for event_id in events[4:6]:
        assert fake.deliver(event_id, registration.hook_id, secret="whsec_wrong") == 400
        assert fake.deliver(event_id, registration.hook_id, secret="whsec_wrong") == 400
    assert fake.deliver(events[6], registration.hook_id, secret="whsec_wrong") == 400
    assert fake.deliver(events[6], registration.hook_id) == 200
    since = datetime.now(UTC) - timedelta(hours=1)

    failed = api.events_page(since=since, only_failed=True, token=None)
    every = api.events_page(since=since, only_failed=False, token=None)

    assert {item.external_id for item in failed.items} == {*events[4:6], *events[7:]}
    assert failed.next_token is None
    assert {item.external_id for item in every.items} == set(events)
    assert events_listed(fake)[0].params["delivery_success"] == "false"
    assert len(receiver.refused) == 5 and len(receiver.received) == 5


def test_nothing_older_than_30_days_is_listed_however_far_back_it_is_asked(fake):
    now = int(time.time())
    fake.create_endpoint("https://hooks.example.com/x")  # none of them delivered
    fake.create_event("invoice.paid", {"id": "in_old"}, now - 31 * DAY)
    fake.create_event("invoice.paid", {"id": "in_edge"}, now - 30 * DAY - 60)
    recent = fake.create_event("invoice.paid", {"id": "in_recent"}, now - 29 * DAY)

    for only_failed in (False, True):
        page = api_for(fake).events_page(
            since=datetime.fromtimestamp(now - 90 * DAY, UTC), only_failed=only_failed, token=None
        )
        assert [item.external_id for item in page.items] == [recent["id"]]


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        (400, remote.INVALID),
        (401, remote.UNAUTHORIZED),
        (403, remote.FORBIDDEN),
        (404, remote.NOT_FOUND),
        (429, remote.RATE_LIMITED),
        (500, remote.SERVER_ERROR),
        (503, remote.SERVER_ERROR),
    ],
)
def test_each_error_answer_is_one_request_with_its_reason_and_status(fake, status, reason):
    fake.create_event("invoice.paid", {"id": "in_1"})
    fake.script(status, retry_after=7 if status == 429 else None)
    api = api_for(fake)
    since = datetime.now(UTC) - timedelta(hours=1)

    with pytest.raises(RemoteError) as caught:
        api.events_page(since=since, only_failed=False, token=None)

    assert (caught.value.reason, caught.value.status) == (reason, status)
    assert caught.value.retry_after == (7 if status == 429 else None)
    # stripe-python retries nothing: the core counts and paces every request.
    assert len(fake.requests) == 1
    assert len(api.events_page(since=since, only_failed=False, token=None).items) == 1


def test_a_retry_after_is_read_wherever_stripe_sends_one(fake):
    fake.script(503, retry_after=2.5)

    with pytest.raises(RemoteError) as caught:
        api_for(fake).events_page(since=datetime.now(UTC), only_failed=False, token=None)

    assert (caught.value.reason, caught.value.retry_after) == (remote.SERVER_ERROR, 2.5)


def test_no_answer_is_unreachable_with_no_status():
    api = StripeAPI(KEY, Place(api_url=f"http://127.0.0.1:{free_port()}"), timeout=2)

    with pytest.raises(RemoteError) as caught:
        api.events_page(since=datetime.now(UTC), only_failed=False, token=None)

    assert (caught.value.reason, caught.value.status) == (remote.UNREACHABLE, None)
    assert KEY not in str(caught.value)


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (200, b"<html>maintenance</html>", remote.BAD_ANSWER),
        (200, b'{"object": "list", "url": "/v1/events"}', remote.BAD_ANSWER),
        (
            200,
            b'{"object": "list", "data": [{"id": "evt_1"}], "has_more": false}',
            remote.BAD_ANSWER,
        ),
        (200, b'{"object": "list", "data": [], "has_more": true}', remote.BAD_ANSWER),
        (400, b'{"message": "no error object"}', remote.BAD_ANSWER),
        (502, b"<html>Bad Gateway</html>", remote.SERVER_ERROR),
    ],
    ids=["not-json", "no-data", "event-without-created", "more-after-nothing", "no-error", "502"],
)
def test_an_answer_that_is_not_stripes_is_a_bad_answer(fake, status, body, reason):
    fake.script(status, body=body)

    with pytest.raises(RemoteError) as caught:
        api_for(fake).events_page(since=datetime.now(UTC), only_failed=False, token=None)

    assert (caught.value.reason, caught.value.status) == (reason, status)


@pytest.mark.parametrize("refusal", ["revoked", "without-permission", "scripted"])
def test_the_key_and_its_last_characters_never_reach_an_error_or_a_log(fake, caplog, refusal):
    caplog.set_level(logging.DEBUG)
    if refusal == "revoked":
        fake.revoke(KEY)
    elif refusal == "without-permission":
        fake.add_key(KEY, permissions=())
    else:
        fake.script(401)

    with pytest.raises(RemoteError) as caught:
        api_for(fake).events_page(since=datetime.now(UTC), only_failed=False, token=None)

    error = caught.value
    assert error.reason == (
        remote.FORBIDDEN if refusal == "without-permission" else remote.UNAUTHORIZED
    )
    # Stripe's own words, with the key it names masked out.
    assert "provided" in str(error)
    told = "".join([str(error), repr(error), *traceback.format_exception(error)])
    logged = caplog.text + " ".join(str(record.args) for record in caplog.records)
    assert "Stripe v1 API error received" in caplog.text
    for text in (told, logged):
        assert KEY not in text and LAST_4 not in text and "rk_test_" not in text
    assert error.__cause__ is None and error.__context__ is None


def test_the_key_given_is_blotted_out_whatever_its_shape(fake):
    odd_key = "not-a-stripe-key-at-all"
    fake.script(401, body=json.dumps({"error": {"type": "x", "message": odd_key}}).encode())
    api = StripeAPI(odd_key, Place(api_url=fake.url))

    with pytest.raises(RemoteError) as caught:
        api.events_page(since=datetime.now(UTC), only_failed=False, token=None)

    assert odd_key not in str(caught.value)


def test_a_key_that_can_read_events_only_cannot_register(fake):
    fake.add_key(KEY, permissions=[EVENTS_READ])
    api = api_for(fake)

    assert api.events_page(since=datetime.now(UTC), only_failed=False, token=None).items == []
    with pytest.raises(RemoteError) as caught:
        api.register(url="https://example.com/hooks/shop", event_types=[])
    assert (caught.value.reason, caught.value.status) == (remote.FORBIDDEN, 403)


def test_register_describe_and_unregister_follow_what_stripe_holds(fake, caplog):
    caplog.set_level(logging.DEBUG)
    url = "https://hooks.example.com/hooks/shop"

    made = api_for(fake).register(url=url, event_types=["invoice.paid", "customer.created"])

    assert made.hook_id.startswith("we_") and str(made.secret).startswith("whsec_")
    assert (made.url, made.event_types, made.enabled) == (
        url,
        ("invoice.paid", "customer.created"),
        True,
    )
    held = fake.endpoint(made.hook_id)
    assert (held["url"], held["enabled_events"], held["description"]) == (
        url,
        ["invoice.paid", "customer.created"],
        "hooklatch",
    )
    assert str(made.secret) not in repr(made) and str(made.secret) not in caplog.text
    api = api_for(fake, hook_id=made.hook_id)
    described = api.describe()
    assert (described.hook_id, described.url, described.enabled, described.secret) == (
        made.hook_id,
        url,
        True,
        None,
    )

    fake.update_endpoint(made.hook_id, disabled=True, url="https://elsewhere.example.com/x")
    drifted = api.describe()
    assert (drifted.enabled, drifted.url) == (False, "https://elsewhere.example.com/x")

    api.unregister()
    with pytest.raises(KeyError):
        fake.endpoint(made.hook_id)
    for gone in (api.describe, api.unregister):
        with pytest.raises(RemoteError) as caught:
            gone()
        assert (caught.value.reason, caught.value.status) == (remote.NOT_FOUND, 404)


def test_register_without_event_types_listens_for_every_event(fake):
    made = api_for(fake).register(url="https://hooks.example.com/x", event_types=())

    assert made.event_types == ("*",)
    assert fake.endpoint(made.hook_id)["enabled_events"] == ["*"]


def test_an_event_type_stripe_does_not_know_is_refused_as_invalid(fake):
    with pytest.raises(RemoteError) as caught:
        api_for(fake).register(url="https://hooks.example.com/x", event_types=["Not An Event"])

    assert (caught.value.reason, caught.value.status) == (remote.INVALID, 400)
    assert "enabled_events[0]" in str(caught.value)


def test_describe_without_a_registered_endpoint_is_not_found(fake):
    with pytest.raises(RemoteError) as caught:
        api_for(fake).describe()

    assert caught.value.reason == remote.NOT_FOUND
    assert fake.requests == []


def test_stripe_makes_the_secret_so_none_can_be_given(fake):
    with pytest.raises(ValueError, match="Stripe makes the signing secret"):
        api_for(fake).register(url="https://hooks.example.com/x", event_types=(), secret="s")


def test_the_secret_register_returns_verifies_the_next_delivery(fake, receiver):
    made = api_for(fake).register(url=receiver.url, event_types=["invoice.paid"])
    receiver.secret = str(made.secret)
    event = fake.create_event("invoice.paid", {"id": "in_1", "object": "invoice"})

    assert fake.deliver(str(event["id"]), made.hook_id) == 200
    assert json.loads(receiver.received[0])["id"] == event["id"]
    assert fake.deliver(str(event["id"]), made.hook_id, secret="whsec_other") == 400
    assert receiver.refused[0].reason == "bad_signature"
    assert fake.delivery_success(str(event["id"]))


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": 101}, "less than or equal to 100"),
        ({"limit": 0}, "greater than or equal to 1"),
        ({"starting_after": "evt_1", "ending_before": "evt_2"}, "only specify one"),
        ({"type": "invoice.paid", "types": ["invoice.paid"]}, "not both"),
        ({"starting_after": "evt_missing"}, "No such event"),
    ],
)
def test_the_local_server_refuses_what_stripe_refuses(fake, params, message):
    """Checked with stripe-python itself, not with StripeAPI."""
    client = stripe.StripeClient(KEY, base_addresses={"api": fake.url}, max_network_retries=0)

    with pytest.raises(stripe.InvalidRequestError, match=message) as caught:
        client.v1.events.list(params)

    assert caught.value.http_status == 400


def test_the_local_server_pages_back_and_filters_by_time_and_type(fake):
    client = stripe.StripeClient(KEY, base_addresses={"api": fake.url}, max_network_retries=0)
    start = int(time.time()) - 60
    made = [
        fake.create_event("invoice.paid" if i % 2 else "customer.created", {}, start + i)
        for i in range(6)
    ]
    newest_first = [str(event["id"]) for event in reversed(made)]

    first = client.v1.events.list({"limit": 2})
    back = client.v1.events.list({"limit": 2, "ending_before": newest_first[3]})
    invoices = client.v1.events.list({"type": "invoice.*"})
    customers = client.v1.events.list({"types": ["customer.created"]})
    between = client.v1.events.list({"created": {"gt": start + 1, "lte": start + 3}})
    exactly = client.v1.events.list({"created": start + 4})

    assert [event.id for event in first.data] == newest_first[:2] and first.has_more
    assert [event.id for event in back.data] == newest_first[1:3] and back.has_more
    assert [event.id for event in invoices.data] == newest_first[::2]
    assert [event.id for event in customers.data] == newest_first[1::2]
    assert [event.id for event in between.data] == newest_first[2:4]
    assert [event.id for event in exactly.data] == [newest_first[1]]
    assert not (invoices.has_more or customers.has_more or between.has_more)


def test_the_local_server_lists_and_updates_webhook_endpoints_as_stripe_does(fake):
    client = stripe.StripeClient(KEY, base_addresses={"api": fake.url}, max_network_retries=0)
    older = client.v1.webhook_endpoints.create(
        {"url": "https://a.example.com/x", "enabled_events": ["*"]}
    )
    newer = client.v1.webhook_endpoints.create(
        {"url": "https://b.example.com/x", "enabled_events": ["*"]}
    )

    first = client.v1.webhook_endpoints.list({"limit": 1})
    rest = client.v1.webhook_endpoints.list({"limit": 1, "starting_after": first.data[0].id})
    changed = client.v1.webhook_endpoints.update(
        older.id, {"disabled": True, "enabled_events": ["invoice.paid"]}
    )

    assert [first.data[0].id, rest.data[0].id] == [newer.id, older.id]
    assert first.has_more and not rest.has_more
    assert str(older.secret).startswith("whsec_") and "secret" not in rest.data[0]
    assert (changed.status, changed.enabled_events) == ("disabled", ["invoice.paid"])
