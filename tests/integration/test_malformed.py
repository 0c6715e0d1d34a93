"""Malformed requests get a 4xx with a clear reason and store nothing: bodies over the limit
whatever their framing, JSON nested past what the parser can take, absurd times and
timestamps, and admin query parameters out of range."""

import io
import json
import socket
from dataclasses import replace

import pytest

from hooklatch import create_app
from tests.support.database import count, stored_for
from tests.support.pipeline import make_endpoint
from tests.support.processes import start_gunicorn
from tests.support.signing import stripe_event, stripe_headers
from tests.support.tokens import AUTH

SECRET = "whsec_test_secret"
LIMIT = 1024


def padded_event(event_id, size):
    """A Stripe event of exactly ``size`` bytes."""
    body = stripe_event(event_id, note="")
    padded = stripe_event(event_id, note="x" * (size - len(body)))
    assert len(padded) == size
    return padded


@pytest.fixture
def small(settings, router):
    """A client and runtime of an app whose body limit is LIMIT bytes."""
    app = create_app(replace(settings, max_body_bytes=LIMIT), router=router)
    yield app.test_client(), app.extensions["hooklatch"]
    app.extensions["hooklatch"].dispose()


def post_chunked(client, endpoint, body):
    """A body of unknown length, as a server that reads chunked encoding hands it over."""
    return client.post(
        f"/hooks/{endpoint}",
        input_stream=io.BytesIO(body),
        headers={**stripe_headers(body, SECRET), "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )


def test_a_chunked_body_over_the_limit_is_413_not_judged_on_its_first_bytes(small):
    client, runtime = small
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    response = post_chunked(client, endpoint, padded_event("evt_chunked_big", LIMIT + 1))
    assert (response.status_code, response.json["error"]) == (413, "body_too_large")
    assert stored_for(runtime, endpoint) == 0
    assert count(runtime, "SELECT count(*) FROM refusals") == 0


def test_a_chunked_body_of_exactly_the_limit_is_stored(small):
    client, runtime = small
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    response = post_chunked(client, endpoint, padded_event("evt_chunked_fits", LIMIT))
    assert response.status_code == 200, response.json
    assert stored_for(runtime, endpoint) == 1


def raw_chunked_post(base, path, body, headers):
    """POST ``body`` in 100-byte chunks over a plain socket; returns (status, JSON body)."""
    host, port = base.removeprefix("http://").split(":")
    head = [f"POST {path} HTTP/1.1", f"Host: {host}", "Transfer-Encoding: chunked"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    pieces = [body[i : i + 100] for i in range(0, len(body), 100)]
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    request = ("\r\n".join([*head, "Connection: close"]) + "\r\n\r\n").encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request + chunks + b"0\r\n\r\n")
        answer = b""
        while data := sock.recv(65536):
            answer += data
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


@pytest.mark.slow
def test_a_chunked_body_over_the_limit_is_413_through_gunicorn(procs, settings, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    base, _ = start_gunicorn(procs, settings, workers=1, HOOKLATCH_MAX_BODY_BYTES=str(LIMIT))
    path = f"/hooks/{endpoint}"
    over = padded_event("evt_raw_big", LIMIT + 1)
    status, answer = raw_chunked_post(base, path, over, stripe_headers(over, SECRET))
    assert (status, answer["error"]) == (413, "body_too_large")
    fits = padded_event("evt_raw_fits", LIMIT)
    status, answer = raw_chunked_post(base, path, fits, stripe_headers(fits, SECRET))
    assert (status, answer["status"]) == (200, "accepted")
    assert stored_for(runtime, endpoint) == 1


def test_a_signed_body_nested_too_deeply_to_parse_is_malformed(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = b'{"id": "evt_deep", "type": "invoice.paid", "data": ' + b"[" * 100_000 + b"]" * 100_000
    body += b"}"
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
    assert stored_for(runtime, endpoint) == 0


@pytest.mark.parametrize(
    ("event_id", "event_type"),
    [
        (r"evt_\u0000", "invoice.paid"),
        (r"evt_\ud800", "invoice.paid"),
        ("evt_" + "x" * 252, "invoice.paid"),
        ("evt_type", r"invoice.\u0000"),
        ("evt_type", "x" * 256),
    ],
    ids=["nul-id", "surrogate-id", "long-id", "nul-type", "long-type"],
)
def test_a_signed_event_whose_id_or_type_cannot_be_stored_is_malformed(
    client, runtime, event_id, event_type
):
    """Not 500 (the driver refuses NUL and lone surrogates, here as JSON escapes) nor 503
    (a value too long for its column), which the provider would retry for days."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = b'{"id": "%s", "type": "%s", "object": "event"}' % (
        event_id.encode(),
        event_type.encode(),
    )
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (response.status_code, response.json["error"]) == (400, "malformed_body")
    assert stored_for(runtime, endpoint) == 0


@pytest.mark.parametrize("created", [10**20, -(10**20), 10**400, 1e300, True])
def test_a_stripe_event_with_an_absurd_created_time_is_stored_without_a_time(
    client, runtime, created
):
    """The signature holds, so the event is Stripe's: refusing it would lose it to three
    days of retries. Its time is only what Stripe says it was; none is kept."""
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    payload = json.loads(stripe_event("evt_when"))
    body = json.dumps({**payload, "created": created}).encode()
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.status_code == 200, response.json
    assert count(runtime, "SELECT count(*) FROM events WHERE occurred_at IS NULL") == 1


@pytest.mark.parametrize(
    "stamp", ["²", "¹⁷⁰⁰⁰⁰⁰⁰⁰⁰", "\u0661\u0667" + "\u0660" * 8, "+1700000000", "1_700_000_000"]
)
def test_a_generic_hmac_timestamp_that_is_not_ascii_digits_is_malformed(client, runtime, stamp):
    from tests.support.providers.generic_hmac import STRIPE_LIKE

    endpoint, _ = make_endpoint(runtime, "generic-hmac", secrets=["acme"], options=STRIPE_LIKE)
    headers = {
        "X-Acme-Signature": "sha256=" + "0" * 64,
        "X-Acme-Timestamp": stamp,
        "X-Acme-Delivery": "d-1",
        "Content-Type": "application/json",
    }
    response = client.post(f"/hooks/{endpoint}", data=b'{"type": "x"}', headers=headers)
    assert (response.status_code, response.json["error"]) == (400, "malformed_header")
    assert stored_for(runtime, endpoint) == 0


@pytest.mark.parametrize(
    "query",
    [
        "limit=-1",
        "limit=0",
        "limit=501",
        "limit=abc",
        "limit=1.5",
        "limit=\u0663",
        "limit=",
        "limit=9" * 30,
    ],
)
def test_an_admin_events_limit_out_of_range_is_400(client, query):
    response = client.get(f"/admin/events?{query}", headers=AUTH)
    assert (response.status_code, response.json["error"]) == (400, "bad_parameter")
    assert "limit" in response.json["message"]


def test_an_admin_events_status_that_is_no_status_is_400(client):
    response = client.get("/admin/events?status=deleted", headers=AUTH)
    assert (response.status_code, response.json["error"]) == (400, "bad_parameter")
    assert "pending, processed, ignored, dead" in response.json["message"]
    assert client.get("/admin/events?status=dead&limit=500", headers=AUTH).status_code == 200


@pytest.mark.parametrize("event_id", ["0", "-1", "abc", "\u0661", "9223372036854775808", "9" * 40])
def test_an_admin_event_id_out_of_range_is_400(client, event_id):
    for response in (
        client.get(f"/admin/events/{event_id}", headers=AUTH),
        client.post(f"/admin/events/{event_id}/replay", json={}, headers=AUTH),
    ):
        assert (response.status_code, response.json["error"]) == (400, "bad_parameter")
    assert client.get("/admin/events/9223372036854775807", headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 100_000 + b"]" * 100_000,
        b"[1]",
        b'{"reason": 7}',
        b'{"reason": "a\\u0000b"}',
        b'{"requested_by": "\\ud800"}',
    ],
    ids=["deep", "not-an-object", "not-text", "nul", "lone-surrogate"],
)
def test_an_admin_replay_body_that_cannot_be_stored_is_400(client, runtime, body):
    from tests.support.pipeline import deliver

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    event_id = deliver(client, endpoint, "evt_replay_body")
    response = client.post(
        f"/admin/events/{event_id}/replay",
        data=body,
        headers={**AUTH, "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.json
    assert response.json["error"] in ("malformed_body", "bad_parameter")
    assert count(runtime, "SELECT count(*) FROM replays") == 0
