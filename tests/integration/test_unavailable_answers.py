"""A delivery the server cannot verify because of its own set-up is answered with the
reason code alone: which plugins are installed, and what is wrong with the keys, go to
the log, never to whoever calls /hooks/<id>."""

import logging
from dataclasses import replace

import pytest
from cryptography.fernet import Fernet

from hooklatch import create_app
from hooklatch.endpoints.models import Endpoint, EndpointSecret
from tests.support.pipeline import make_endpoint
from tests.support.providers.meta import APP_SECRET, VERIFY_TOKEN
from tests.support.signing import stripe_event, stripe_headers

GENERIC = "this endpoint cannot take deliveries right now; nothing was stored. Retry later."


def assert_reveals_nothing(response, reason, runtime):
    assert response.status_code == 503
    assert response.json == {"error": reason, "message": GENERIC}
    text = response.get_data(as_text=True).lower()
    for word in ("install", "key", "decrypt", "hooklatch_", "acme", *runtime.providers):
        assert word not in text, word


def test_an_endpoint_of_an_uninstalled_provider_does_not_list_the_installed_ones(
    client, runtime, caplog
):
    with runtime.session_factory.begin() as session:
        endpoint = Endpoint(id="ep_acme", name="acme", provider="acme")
        endpoint.secrets.append(
            EndpointSecret(ciphertext=runtime.box.encrypt("s"), fingerprint="x")
        )
        session.add(endpoint)
    body = stripe_event("evt_acme")
    with caplog.at_level(logging.ERROR):
        response = client.post("/hooks/ep_acme", data=body, headers=stripe_headers(body, "s"))

    assert_reveals_nothing(response, "provider_unavailable", runtime)
    assert response.headers["Retry-After"] == "30"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "provider 'acme' is not installed (installed: " in logged and "stripe" in logged
    assert "/hooks/ep_acme" in logged


@pytest.fixture
def app_without_the_key(settings, router):
    """The same database, served by an app whose only key is not the one in use."""
    app = create_app(
        replace(settings, secret_keys=(Fernet.generate_key().decode(),)), router=router
    )
    yield app
    app.extensions["hooklatch"].dispose()


def test_a_secret_no_key_decrypts_is_a_bare_503_with_the_detail_in_the_log(
    runtime, app_without_the_key, caplog
):
    endpoint, _ = make_endpoint(runtime, secrets=["whsec_k"])
    body = stripe_event("evt_keys")
    with caplog.at_level(logging.ERROR):
        response = app_without_the_key.test_client().post(
            f"/hooks/{endpoint}", data=body, headers=stripe_headers(body, "whsec_k")
        )

    assert_reveals_nothing(response, "secret_unavailable", runtime)
    assert response.headers["Retry-After"] == "30"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "cannot be decrypted with HOOKLATCH_SECRET_KEYS" in logged
    assert endpoint in logged and "whsec_k" not in logged


def test_a_handshake_whose_token_no_key_decrypts_is_a_bare_503_too(
    runtime, app_without_the_key, caplog
):
    endpoint, _ = make_endpoint(
        runtime, "meta", secrets=[APP_SECRET], options={"verify_token": VERIFY_TOKEN}
    )
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "7"}
    with caplog.at_level(logging.ERROR):
        response = app_without_the_key.test_client().get(f"/hooks/{endpoint}", query_string=query)

    assert_reveals_nothing(response, "secret_unavailable", runtime)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "cannot be decrypted with HOOKLATCH_SECRET_KEYS" in logged
    assert VERIFY_TOKEN not in logged and APP_SECRET not in logged
