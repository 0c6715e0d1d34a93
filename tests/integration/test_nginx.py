"""deploy/nginx.conf in front of gunicorn: deliveries pass, slow clients stay in nginx,
oversized bodies stop there.

gunicorn runs sync workers here, which any slow client reaching them would hold: the
slow-client test passes only because nginx reads each request whole first.
"""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import pytest
import requests

from bench.slow_clients import SlowClients
from hooklatch.settings import DEFAULT_MAX_BODY_BYTES
from tests.support.database import stored_for
from tests.support.http import PATIENCE, timed_delivery
from tests.support.nginx import nginx_path, start_nginx
from tests.support.pipeline import make_endpoint
from tests.support.processes import start_gunicorn
from tests.support.providers.square import SquareCase, square_signature

SECRET = "whsec_test_secret"
PUBLIC_URL = "https://hooks.example.test"


@pytest.fixture
def nginx_url(procs, proc_settings, tmp_path):
    nginx_path()  # before anything starts
    upstream, _ = start_gunicorn(procs, proc_settings, HOOKLATCH_PUBLIC_URL=PUBLIC_URL)
    base, _ = start_nginx(procs, tmp_path / "nginx", urlsplit(upstream).port or 0)
    return base


@pytest.mark.slow
def test_a_signed_delivery_through_nginx_is_stored(nginx_url, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    status, _ = timed_delivery(f"{nginx_url}/hooks/{endpoint}", "evt_through_nginx", SECRET)
    assert status == 200
    assert stored_for(runtime, endpoint) == 1


@pytest.mark.slow
def test_a_signature_over_the_public_url_and_query_holds_through_nginx(nginx_url, runtime):
    """Square signs the URL it called: nginx passes the path and query string unchanged,
    and hooklatch rebuilds the rest from HOOKLATCH_PUBLIC_URL, not from nginx's Host."""
    key = "square-signature-key"
    endpoint, _ = make_endpoint(runtime, "square", secrets=[key])
    path = f"/hooks/{endpoint}?source=square&note=a%2Fb+c"
    body = SquareCase().event_body("evt_square_nginx")
    signature = square_signature(key, PUBLIC_URL + path, body)
    response = requests.post(
        nginx_url + path,
        data=body,
        headers={"Content-Type": "application/json", "x-square-hmacsha256-signature": signature},
        timeout=PATIENCE,
    )
    assert response.status_code == 200, response.text
    assert stored_for(runtime, endpoint) == 1


@pytest.mark.slow
def test_fifty_slow_clients_through_nginx_do_not_block_signed_deliveries(nginx_url, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    url = f"{nginx_url}/hooks/{endpoint}"

    with SlowClients(url, 50) as slow:
        time.sleep(1)
        answers = [timed_delivery(url, f"evt_nginx_slow_{n:02d}", SECRET) for n in range(10)]
        held = slow.held()

    assert [status for status, _ in answers] == [200] * 10, answers
    assert max(seconds for _, seconds in answers) < PATIENCE
    assert held == 50  # nginx kept them, waiting for their bodies
    assert stored_for(runtime, endpoint) == 10


@pytest.mark.slow
def test_a_body_over_the_default_limit_gets_413_from_nginx(nginx_url, runtime):
    endpoint, _ = make_endpoint(runtime, "stripe", secrets=[SECRET])
    url = f"{nginx_url}/hooks/{endpoint}"
    headers = {"Content-Type": "application/json"}

    over = requests.post(url, data=b" " * (DEFAULT_MAX_BODY_BYTES + 1), headers=headers, timeout=30)
    assert over.status_code == 413
    assert over.headers["Server"] == "nginx" and "<html>" in over.text  # not hooklatch's JSON

    # At the limit the body passes nginx and hooklatch answers (it is not signed).
    at = requests.post(url, data=b" " * DEFAULT_MAX_BODY_BYTES, headers=headers, timeout=30)
    assert at.status_code in (400, 401)
    assert at.headers["Content-Type"] == "application/json"
    assert stored_for(runtime, endpoint) == 0
