"""/hooks/<endpoint-id> is answered beneath Flask, as Flask's handlers would answer it:
every request to the public URL, a flood of bad signatures included, skips Flask's
request machinery."""

import logging

import pytest
from flask import request_started

from tests.support.pipeline import make_endpoint
from tests.support.signing import stripe_event, stripe_headers

SECRET = "whsec_test_secret"


def test_deliveries_do_not_enter_flask_but_other_paths_do(app, client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_route_1")
    seen = []

    def started(sender, **extra):
        seen.append(extra)

    request_started.connect(started, app)
    try:
        good = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
        bad = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, "x"))
        assert (good.status_code, bad.status_code) == (200, 401)
        assert seen == []
        assert client.get("/healthz").status_code == 200
        assert len(seen) == 1
    finally:
        request_started.disconnect(started, app)


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_are_answered_405_in_json(client, runtime, method):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    response = client.open(f"/hooks/{endpoint}", method=method)
    assert response.status_code == 405
    assert response.json["error"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/hooks/", "/hooks/ep_a/more", "/hooksep_a"])
def test_paths_that_name_no_endpoint_are_flasks_json_404(client, path):
    response = client.post(path, data=b"{}")
    assert (response.status_code, response.json["error"]) == (404, "not_found")


def test_a_get_to_a_provider_without_a_handshake_is_405(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    response = client.get(f"/hooks/{endpoint}")
    assert (response.status_code, response.json["error"]) == (405, "method_not_allowed")
    assert response.headers["Allow"] == "POST"


def test_an_unexpected_error_is_answered_500_in_json_and_logged(
    client, runtime, monkeypatch, caplog
):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    provider = runtime.provider("stripe")

    def broken(delivery):
        raise RuntimeError("a plugin bug")

    monkeypatch.setattr(provider, "parse", broken)
    caplog.set_level(logging.ERROR)
    body = stripe_event("evt_route_broken")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert (response.status_code, response.json["error"]) == (500, "internal_error")
    assert "a plugin bug" not in response.get_data(as_text=True)
    [record] = [r for r in caplog.records if r.exc_info]
    assert "a plugin bug" in str(record.exc_info[1])


def test_answers_are_json_as_flask_writes_it(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_route_json")
    response = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert response.mimetype == "application/json"
    assert response.get_data(as_text=True).endswith("}\n")
    assert response.json["status"] == "accepted"


def test_a_disabled_endpoint_under_a_flood_is_404_every_time_not_401_from_the_cache(
    client, runtime
):
    from hooklatch.endpoints.service import get_endpoint

    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    body = stripe_event("evt_route_cached")
    ok = client.post(f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, SECRET))
    assert ok.status_code == 200  # the endpoint is cached now
    with runtime.session_factory.begin() as session:
        get_endpoint(session, endpoint).enabled = False
    forged = stripe_headers(body, "whsec_forged")
    answers = {
        client.post(f"/hooks/{endpoint}", data=body, headers=forged).status_code for _ in range(20)
    }
    assert answers == {404}


def test_405_names_the_methods_answered(client, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    response = client.put(f"/hooks/{endpoint}")
    assert set(response.headers["Allow"].split(", ")) == {"GET", "HEAD", "POST"}
