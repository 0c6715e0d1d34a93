"""An event id repeated with another body. Where the provider does not sign the id
(GitHub's X-GitHub-Delivery, Shopify's id headers, generic-hmac's id_header), anyone who
has seen one signed body can send it under the id of an event still to come: the real
event must still be stored and run, and both flagged. Where the id is signed, only the
provider can send another body under it, and it stays a duplicate."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest
import requests
from sqlalchemy import select

from hooklatch.errors import VerificationError
from hooklatch.providers.base import IncomingEvent, Provider
from tests.support.cli import run_cli
from tests.support.console import signed_in
from tests.support.database import count, load_event, sqlite_settings
from tests.support.effects import seen
from tests.support.handlers import record_what_was_seen
from tests.support.pipeline import drain, make_endpoint, post_json, wait_for
from tests.support.processes import hooklatch_cmd, process_env, start_procfile_web
from tests.support.signing import github_headers, stripe_event, stripe_headers
from tests.support.tokens import AUTH

SECRET = "acme-signing-secret"
OPTIONS = {"header": "X-Acme-Signature", "id_header": "X-Acme-Id", "type_header": "X-Acme-Type"}


def signed(body: bytes, event_id: str, kind: str = "seen.order") -> dict[str, str]:
    """A generic-hmac delivery: the body signed, the id and type in headers that are not."""
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {
        "Content-Type": "application/json",
        "X-Acme-Signature": digest,
        "X-Acme-Id": event_id,
        "X-Acme-Type": kind,
    }


def order(number: int, amount: int, **more) -> bytes:
    return json.dumps({"order": number, "amount": amount, **more}).encode()


def runs(runtime):
    with runtime.engine.connect() as connection:
        return connection.execute(select(seen).order_by(seen.c.id)).all()


@pytest.mark.slow
def test_a_captured_body_sent_under_a_future_id_does_not_silence_the_real_event(
    procs, proc_settings, runtime
):
    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=[SECRET], options=OPTIONS)
    base, _, web = start_procfile_web(procs, proc_settings)
    env = process_env(proc_settings)
    relay = procs("relay", hooklatch_cmd("relay"), env)
    worker = procs("worker", hooklatch_cmd("worker"), env)
    url = f"{base}/hooks/{endpoint}"

    def post(body, event_id):
        response = requests.post(url, data=body, headers=signed(body, event_id), timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    captured = order(1, 5)
    first = post(captured, "order-1")["events"][0]["id"]
    # Someone who saw that signed body sends it under the id of an order still to come.
    forged = post(captured, "order-1002")
    assert forged["status"] == "accepted"
    forged_id = forged["events"][0]["id"]

    refund = order(1002, 990, kind="refund")
    real = post(refund, "order-1002")
    assert real["status"] == "accepted"  # not "duplicate": the refund is kept
    real_id = real["events"][0]["id"]
    assert real_id not in (first, forged_id)
    again = post(refund, "order-1002")  # the sender's retry of the refund
    assert (again["status"], again["events"][0]["id"]) == ("duplicate", real_id)

    wait_for(
        lambda: len(runs(runtime)) == 3,
        timeout=30,
        message="three events handled",
        explain=lambda: relay.log()[-2000:] + worker.log()[-2000:] + web.log()[-2000:],
    )
    by_event = {row.event_id: row for row in runs(runtime)}
    assert set(by_event) == {first, forged_id, real_id}  # each ran once, the refund too
    assert json.loads(by_event[real_id].body) == {"order": 1002, "amount": 990, "kind": "refund"}
    # What the handlers were told: the relabelled body repeats order-1's, and the refund
    # conflicts with the event first stored under its id.
    assert by_event[forged_id].repeats_event_id == first
    assert by_event[forged_id].conflicts_with_event_id is None
    assert by_event[real_id].conflicts_with_event_id == forged_id
    assert by_event[real_id].repeats_event_id is None
    keys = {row.idempotency_key for row in by_event.values()}
    assert len(keys) == 3  # downstream dedupe cannot swallow the refund either
    assert by_event[real_id].idempotency_key.startswith(f"hooklatch:{endpoint}:order-1002:")

    assert load_event(runtime, forged_id).mismatched_duplicates == 2  # the refund, twice
    scraped = requests.get(f"{base}/metrics", headers=AUTH, timeout=10).text
    assert (
        f'hooklatch_event_id_conflicts_total{{endpoint="{endpoint}",provider="generic-hmac"}} 1.0'
        in scraped
    )
    assert "repeats the id of event" in web.log()


def test_a_signed_id_with_another_body_is_the_providers_own_resend_and_stays_a_duplicate(
    client, runtime, router
):
    router.on("stripe", "seen.*")(record_what_was_seen)
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=["whsec_test_secret"])
    ids = []
    for amount in (2000, 2001):  # a re-send whose body changed: only Stripe can sign it
        body = stripe_event("evt_resent", event_type="seen.invoice", amount_paid=amount)
        response = client.post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, "whsec_test_secret")
        )
        ids.append((response.json["status"], response.json["events"][0]["id"]))
    (_, first), (status, second) = ids
    assert (status, second) == ("duplicate", first)
    assert count(runtime, "SELECT count(*) FROM events") == 1
    assert load_event(runtime, first).mismatched_duplicates == 1
    drain(runtime)
    assert len(runs(runtime)) == 1


def test_the_operator_sees_the_conflict_in_the_api_the_cli_and_the_console(
    app, client, runtime, settings
):
    endpoint, _ = make_endpoint(runtime, "github", name="conflicts", secrets=["gh-secret"])
    answers = []
    for number in (1, 2, 2):
        body = json.dumps({"action": "opened", "issue": {"number": number}}).encode()
        headers = github_headers(body, "gh-secret", delivery="d-1")
        answers.append(client.post(f"/hooks/{endpoint}", data=body, headers=headers).json)
    assert [a["status"] for a in answers] == ["accepted", "accepted", "duplicate"]
    first, conflict, retry = (a["events"][0]["id"] for a in answers)
    assert retry == conflict

    shown = client.get(f"/admin/events/{conflict}", headers=AUTH).json
    assert shown["conflicts_with_event_id"] == first
    assert client.get(f"/admin/events/{first}", headers=AUTH).json["conflicted_by"] == [conflict]
    data = json.loads(run_cli(settings, "endpoints", "show", "conflicts").output)
    assert data["conflicts"] == 1
    shown = json.loads(run_cli(settings, "events", "show", str(conflict)).output)
    assert shown["conflicts_with_event_id"] == first

    console, _ = signed_in(app)
    page = console.get(f"/admin/console/events/{conflict}").get_data(as_text=True)
    assert f"event {first}</a>, with another body" in page
    page = console.get(f"/admin/console/events/{first}").get_data(as_text=True)
    assert f"event {conflict}</a>" in page and "the same id with other bodies" in page


class Batches(Provider):
    """A sender of several events per request, whose ids are not signed."""

    name = "batches"

    def verify(self, delivery, *, secrets, now):
        if delivery.header("x-token") not in secrets:
            raise VerificationError("bad token")

    def parse(self, delivery):
        return [IncomingEvent(item["id"], "seen.item") for item in json.loads(delivery.body)]


def test_the_events_of_one_request_are_not_compared_with_a_resend_batched_otherwise(
    client, runtime
):
    """Each event of a request gets the request's body, and a sender may batch its
    re-sends otherwise: those bodies say nothing of the events' own."""
    runtime.providers["batches"] = Batches()
    endpoint, _ = make_endpoint(runtime, "batches", secrets=["tok"])
    for items in (["a", "b"], ["a", "b", "c"]):
        body = json.dumps([{"id": item} for item in items]).encode()
        response = post_json(client, endpoint, body, {"X-Token": "tok"})
        assert response.status_code == 200, response.json
    statuses = [event["status"] for event in response.json["events"]]
    assert statuses == ["duplicate", "duplicate", "accepted"]
    assert count(runtime, "SELECT count(*) FROM events WHERE variant <> ''") == 0


@pytest.fixture
def sqlite_client(settings, tmp_path, client_at, runtime):
    """The embedded default: SQLite under the instance folder, no Redis."""
    sqlite = sqlite_settings(settings, tmp_path / "db")
    from hooklatch import create_app

    app = create_app(sqlite, router=runtime.router)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


def test_a_conflicting_delivery_is_kept_apart_on_the_embedded_default(sqlite_client):
    client, runtime = sqlite_client
    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=[SECRET], options=OPTIONS)
    statuses = []
    for body in (order(1, 5), order(1002, 990), order(1002, 990)):
        answer = post_json(client, endpoint, body, signed(body, "order-1002")).json
        statuses.append((answer["status"], answer["events"][0]["id"]))
    (_, first), (status, real), (again, retried) = statuses
    assert status == "accepted" and real != first
    assert (again, retried) == ("duplicate", real)
    assert load_event(runtime, real).conflicts_with_event_id == first
    assert load_event(runtime, real).body == order(1002, 990)


def test_an_endpoint_whose_sender_changes_bodies_on_retries_keeps_them_duplicates(client, runtime):
    """generic-hmac with retries_change_body=true: a retry whose attempt counter changed
    is the same event, as it was before conflicts were kept apart."""
    options = {**OPTIONS, "retries_change_body": "true"}
    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=[SECRET], options=options)
    answers = []
    for attempt in (1, 2):
        body = order(7, 5, attempt=attempt)
        answers.append(post_json(client, endpoint, body, signed(body, "order-7")).json)
    assert [a["status"] for a in answers] == ["accepted", "duplicate"]
    assert count(runtime, "SELECT count(*) FROM events WHERE endpoint_id = :e", e=endpoint) == 1
