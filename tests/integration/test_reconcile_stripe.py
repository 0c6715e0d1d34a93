"""Reconcile against Stripe (pull): events whose delivery never succeeded are listed since
the cursor, fetched, and stored oldest first under the delivery's unique key, then run
like any other. Against FakeStripe, a local server that answers as Stripe's API
description says and delivers as Stripe does, to the app served over HTTP."""

from __future__ import annotations

import logging
import random
from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import delete, select, update

from hooklatch.endpoints.models import Endpoint
from hooklatch.events.models import Event
from hooklatch.reconcile.models import ProviderHook, ReconcileState
from hooklatch.reconcile.runs import RunRequest, ensure_state
from hooklatch.runtime import reconciler
from tests.support.pipeline import drain, runs_of
from tests.support.reconcile import stripe_and_app, stripe_registered

KEY = "rk_test_reconcile_0123456789abcdef"
WRONG_SECRET = "whsec_not_the_one_stripe_holds"


def registered(
    runtime, fake, *, created_days_ago: float = 0, event_types=("invoice.paid", "customer.updated")
):
    endpoint, hook = stripe_registered(runtime, fake, KEY, event_types=event_types)
    if created_days_ago:
        with runtime.session_factory.begin() as session:
            session.execute(
                update(Endpoint)
                .where(Endpoint.id == endpoint)
                .values(created_at=runtime.clock() - timedelta(days=created_days_ago))
            )
    return endpoint, hook


def run_now(runtime, endpoint, **request):
    return reconciler(runtime).run(
        endpoint, RunRequest(trigger="cli", requested_by="test", **request)
    )


def events_requests(fake):
    return [r for r in fake.requests if r.method == "GET" and r.path == "/v1/events"]


def test_a_thousand_events_120_missing_each_run_once(app, runtime, router):
    """1,000 events: 100 never reached hooklatch, 50 arrived twice, 20 were refused for a
    wrong secret. One reconcile finds the 120 missing; every event then runs once."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        # An endpoint older than Stripe's horizon: its first run would start before it.
        endpoint, hook = registered(runtime, fake, created_days_ago=45)
        now = fake.now()
        created = sorted(now - random.randint(1800, 2 * 86400) for _ in range(1000))
        events = [
            fake.create_event("invoice.paid", {"id": f"in_{n}", "object": "invoice"}, stamp)
            for n, stamp in enumerate(created)
        ]
        order = list(range(1000))
        random.shuffle(order)
        never, twice, refused = order[:100], order[100:150], order[150:170]
        for n, event in enumerate(events):
            if n in never:
                continue
            if n in refused:
                assert fake.deliver(event["id"], hook, secret=WRONG_SECRET) == 401
                continue
            assert fake.deliver(event["id"], hook) == 200
            if n in twice:
                assert fake.deliver(event["id"], hook) == 200
        drain(runtime)
        assert len(ran) == 880

        run = run_now(runtime, endpoint)

        assert run["status"] == "finished", run
        assert (run["missing"], run["fetched"], run["present"]) == (120, 120, 0)
        listed = events_requests(fake)
        assert run["requests"] == run["pages"] == len(listed) == 2  # 120 events, 100 a page
        horizon = now - 30 * 86400
        assert all(int(r.params["created[gte]"]) >= horizon for r in listed)
        assert all(r.params.get("delivery_success") == "false" for r in listed)
        drain(runtime)
        assert len(ran) == 1000
        assert set(Counter(ran).values()) == {1}
        with runtime.session_factory() as session:
            fetched = session.execute(
                select(Event.external_id, Event.origin, Event.verified_by)
                .where(Event.origin == "api")
                .order_by(Event.id)
            ).all()
            state = session.get(ReconcileState, endpoint)
        missing_ids = {events[n]["id"] for n in never + refused}
        assert {row.external_id for row in fetched} == missing_ids
        assert {(row.origin, row.verified_by) for row in fetched} == {("api", "api_call")}
        # Stored oldest first by Stripe's creation time.
        by_id = {event["id"]: event["created"] for event in events}
        stamps = [by_id[row.external_id] for row in fetched]
        assert stamps == sorted(stamps)
        assert run["error"] and "cannot be recovered" in run["error"]  # the clamp, said
        assert state is not None and state.cursor is not None

        second = run_now(runtime, endpoint)
        assert (second["missing"], second["fetched"], second["status"]) == (0, 0, "finished")
        [again] = events_requests(fake)[2:]
        overlap = runtime.settings.reconcile_overlap_seconds
        assert int(again.params["created[gte]"]) == int(state.cursor.timestamp() - overlap)
        assert second["pages"] == 1 and second["listed"] == 0


def test_everything_lists_delivered_events_too_and_finds_them_present(app, runtime, router):
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake)
        kept = fake.create_event("invoice.paid", {"id": "in_kept"}, fake.now() - 600)
        lost = fake.create_event("invoice.paid", {"id": "in_lost"}, fake.now() - 300)
        assert fake.deliver(kept["id"], hook) == 200
        # Stripe says it was delivered, but hooklatch lost it (a database restored from a
        # backup): only a run of every event finds it.
        with runtime.session_factory.begin() as session:
            session.execute(
                update(Event).where(Event.external_id == kept["id"]).values(external_id="evt_gone")
            )
        only_failed = run_now(runtime, endpoint)
        assert (only_failed["listed"], only_failed["missing"]) == (1, 1)
        since = runtime.clock() - timedelta(hours=1)
        everything = run_now(runtime, endpoint, everything=True, since=since)
        assert everything["missing"] == 1 and everything["present"] == 1
        assert lost["id"] in only_failed["sample"] and kept["id"] in everything["sample"]


def test_a_run_from_later_than_the_cursor_leaves_the_cursor_for_what_it_did_not_read(
    app, runtime, router
):
    """A run asked to start after where the cursor resumes reads nothing before then: the
    cursor stays, and the next run still finds the event lost in between."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake, created_days_ago=1)
        cursor = runtime.clock() - timedelta(hours=6)
        with runtime.session_factory.begin() as session:
            ensure_state(session, endpoint)
            session.execute(
                update(ReconcileState)
                .where(ReconcileState.endpoint_id == endpoint)
                .values(cursor=cursor)
            )
        lost = fake.create_event("invoice.paid", {"id": "in_between"}, fake.now() - 5 * 3600)

        recent = run_now(runtime, endpoint, since=runtime.clock() - timedelta(hours=1))

        assert (recent["status"], recent["missing"]) == ("finished", 0)
        assert recent["cursor_after"] == cursor.isoformat()
        assert "cursor stays" in recent["error"]
        regular = run_now(runtime, endpoint)
        assert (regular["missing"], regular["fetched"], regular["sample"]) == (1, 1, [lost["id"]])
        drain(runtime)
        assert len(ran) == 1


def test_a_run_asks_for_nothing_older_than_the_dedupe_keys_kept(app, runtime, router):
    """An event whose row retention deleted has no dedupe key left: fetched again, its
    handlers would run a second time. A run reaches back no further than the keys kept
    (HOOKLATCH_DEDUPE_RETENTION_DAYS), even where the provider's API reaches further."""
    ran = runs_of(router, "stripe")
    runtime.settings = replace(runtime.settings, dedupe_retention_days=7.0)
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake, created_days_ago=45)
        old = fake.create_event("invoice.paid", {"id": "in_old"}, fake.now() - 10 * 86400)
        assert fake.deliver(old["id"], hook) == 200
        drain(runtime)
        with runtime.session_factory.begin() as session:  # as retention does after 7 days
            session.execute(delete(Event).where(Event.external_id == old["id"]))

        run = run_now(runtime, endpoint, everything=True, since=runtime.clock() - timedelta(20))

        assert (run["status"], run["listed"], run["fetched"]) == ("finished", 0, 0)
        [listed] = events_requests(fake)
        assert int(listed.params["created[gte]"]) >= fake.now() - 7 * 86400
        drain(runtime)
        assert len(ran) == 1


def test_a_dry_run_says_what_it_would_fetch_and_changes_nothing(app, runtime):
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        lost = fake.create_event("invoice.paid", {"id": "in_1"}, fake.now() - 60)
        run = run_now(runtime, endpoint, dry_run=True)
        assert (run["missing"], run["fetched"], run["sample"]) == (1, 0, [lost["id"]])
        with runtime.session_factory() as session:
            assert session.scalars(select(Event.id)).all() == []
            state = session.get(ReconcileState, endpoint)
            assert state is not None and state.cursor is None and state.missing_total == 0


@pytest.mark.parametrize("ordering", ["fifo"])
def test_pulled_events_of_an_ordered_endpoint_take_their_key(app, runtime, router, ordering):
    from tests.support.pipeline import configure_ordering

    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        configure_ordering(runtime, endpoint, policy=ordering)
        for n in range(3):
            fake.create_event(
                "invoice.paid", {"id": f"in_{n}", "customer": "cus_1"}, fake.now() - 100 + n
            )
        run_now(runtime, endpoint)
        with runtime.session_factory() as session:
            keys = session.scalars(select(Event.ordering_key)).all()
        assert keys == ["cus_1"] * 3


def types_asked(request) -> set[str]:
    return {value for name, value in request.params.items() if name.startswith("types[")}


def external_ids(runtime) -> list[str]:
    with runtime.session_factory() as session:
        return list(session.scalars(select(Event.external_id).order_by(Event.id)))


@pytest.mark.parametrize("everything", [False, True], ids=["failed", "everything"])
def test_only_the_types_its_webhook_receives_are_fetched(app, runtime, router, everything):
    """Stripe lists an event as undelivered while any endpoint of the account lacks it:
    another endpoint's failures, of a type this one never receives, are not this one's
    to store; nor, listing every event, is anything of another type."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        fake.create_endpoint("http://127.0.0.1:9/elsewhere", ["charge.succeeded", "invoice.paid"])
        stamp = fake.now() - 600
        lost = [fake.create_event("invoice.paid", {"id": f"in_{n}"}, stamp + n) for n in range(3)]
        for n in range(4):  # pending for the other endpoint only
            fake.create_event("charge.succeeded", {"id": f"ch_{n}"}, stamp + n)
        fake.create_event("customer.created", {"id": "cus_1"}, stamp)  # nobody's

        run = run_now(runtime, endpoint, everything=everything)

        assert run["status"] == "finished", run
        assert (run["listed"], run["missing"], run["fetched"]) == (3, 3, 3)
        assert external_ids(runtime) == [event["id"] for event in lost]
        listed = events_requests(fake)
        assert listed and all(
            types_asked(r) == {"invoice.paid", "customer.updated"} for r in listed
        )
        drain(runtime)
        assert sorted(ran) == sorted(set(ran)) and len(ran) == 3


def test_more_types_than_stripe_filters_by_are_filtered_here(app, runtime, router):
    """GET /v1/events takes at most 20 names in ``types``: a webhook that receives more is
    listed whole, and only its own types are stored."""
    types = ["invoice.paid", *(f"acme.thing_{n}" for n in range(20))]
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake, event_types=types)
        fake.create_endpoint("http://127.0.0.1:9/elsewhere", ["charge.succeeded"])
        stamp = fake.now() - 600
        lost = fake.create_event("invoice.paid", {"id": "in_1"}, stamp)
        fake.create_event("charge.succeeded", {"id": "ch_1"}, stamp + 1)

        run = run_now(runtime, endpoint)

        assert (run["status"], run["listed"], run["fetched"]) == ("finished", 1, 1), run
        assert external_ids(runtime) == [lost["id"]]
        assert all(types_asked(r) == set() for r in events_requests(fake))


def test_a_delivery_of_an_event_fetched_already_is_a_plain_duplicate(app, runtime, router, caplog):
    """Stripe keeps retrying for days: its delivery of an event a reconcile fetched is the
    same event, run once, though the API's JSON is not the delivery's to the byte; not an
    id reused with another body."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake)
        lost = fake.create_event("invoice.paid", {"id": "in_late"}, fake.now() - 300)
        assert run_now(runtime, endpoint)["fetched"] == 1
        drain(runtime)

        with caplog.at_level(logging.INFO):
            assert fake.deliver(lost["id"], hook) == 200
        drain(runtime)

    assert len(ran) == 1
    with runtime.session_factory() as session:
        [row] = session.scalars(select(Event)).all()
    assert (row.external_id, row.origin, row.mismatched_duplicates) == (lost["id"], "api", 0)
    assert "reused with a different body" not in caplog.text
    assert "fetched from the provider's API, delivered too" in caplog.text


def test_events_made_in_one_second_are_stored_in_the_order_stripe_made_them(app, runtime):
    """Stripe lists newest first, and its ids say nothing of order: within one second of
    creation, oldest first is the listing's reverse."""
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, _ = registered(runtime, fake)
        stamp = fake.now() - 600
        made = [
            fake.create_event("invoice.paid", {"id": f"in_{n}"}, stamp)["id"] for n in range(30)
        ]
        made.append(fake.create_event("invoice.paid", {"id": "in_next"}, stamp + 1)["id"])

        assert run_now(runtime, endpoint)["fetched"] == 31

    assert external_ids(runtime) == made


def test_a_type_added_at_stripe_since_the_last_look_is_not_dropped(app, runtime, router):
    """The webhook's types are as hooklatch last read them back: a type added at Stripe
    since (in its dashboard) may have events owed to it. Those made after the look are
    stored, and Stripe is asked for every type, as the look is not this run's."""
    ran = runs_of(router, "stripe")
    with stripe_and_app(app, runtime, KEY) as fake:
        endpoint, hook = registered(runtime, fake, event_types=["invoice.paid"])
        with runtime.session_factory.begin() as session:  # read back five minutes ago
            session.execute(
                update(ProviderHook)
                .where(ProviderHook.endpoint_id == endpoint)
                .values(checked_at=runtime.clock() - timedelta(minutes=5))
            )
        fake.update_endpoint(hook, enabled_events=["invoice.paid", "customer.created"])
        before = fake.create_event("customer.created", {"id": "cus_old"}, fake.now() - 540)
        added = fake.create_event("customer.created", {"id": "cus_new"}, fake.now() - 60)

        run = run_now(runtime, endpoint)

        assert run["status"] == "finished", run
        assert all(types_asked(r) == set() for r in events_requests(fake))
        assert external_ids(runtime) == [added["id"]]  # made after the look
        assert before["id"] not in external_ids(runtime)  # made before it: not the webhook's
        drain(runtime)
    assert len(ran) == 1
