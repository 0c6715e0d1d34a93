"""The public route reads headers and writes answers without werkzeug's request and
response objects; what a sender sees must not change."""

import io

import pytest
from werkzeug.datastructures import EnvironHeaders
from werkzeug.test import run_wsgi_app

from hooklatch.errors import (
    JsonAnswer,
    MethodNotAllowed,
    SecretUnavailable,
    error_json,
    error_response,
    json_response,
)
from hooklatch.ingest.views import request_headers


def environ(**extra):
    return {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/hooks/ep_1",
        "QUERY_STRING": "",
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
        "wsgi.input": io.BytesIO(b""),
        **extra,
    }


@pytest.mark.parametrize(
    "extra",
    [
        {
            "HTTP_STRIPE_SIGNATURE": "t=1,v1=ab",
            "HTTP_X_GITHUB_EVENT": "push",
            "HTTP_USER_AGENT": "Stripe/1.0",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": "12",
        },
        # Empty CONTENT_* are left out; HTTP_CONTENT_* (a server's copies) never count.
        {"CONTENT_TYPE": "", "CONTENT_LENGTH": "", "HTTP_CONTENT_TYPE": "text/plain"},
        {"HTTP_CONTENT_LENGTH": "99", "CONTENT_LENGTH": "3", "HTTP_X_HUB_SIGNATURE_256": "x"},
    ],
)
def test_headers_are_read_as_werkzeug_reads_them(extra):
    env = environ(**extra)
    expected = [(name.lower(), value) for name, value in EnvironHeaders(env).items()]
    assert list(request_headers(env).items()) == expected  # stored in this order


@pytest.mark.parametrize(
    "answer",
    [
        ({"status": "accepted", "events": [{"id": 1, "external_id": "evt_é"}]}, 200, None),
        (*error_json(SecretUnavailable(), "POST", "/hooks/ep_1"),),
        (*error_json(MethodNotAllowed("no"), "PUT", "/hooks/ep_1"),),
    ],
)
def test_a_json_answer_is_what_json_response_gives(answer):
    body, status, headers = answer
    ours = run_wsgi_app(JsonAnswer(body, status, headers), environ())
    werkzeugs = run_wsgi_app(json_response(body, status, headers), environ())
    assert b"".join(ours[0]) == b"".join(werkzeugs[0])
    assert ours[1] == werkzeugs[1]
    assert sorted(ours[2].items()) == sorted(werkzeugs[2].items())


def test_a_head_request_gets_the_headers_without_the_body():
    answer = JsonAnswer(*error_json(MethodNotAllowed("no"), "HEAD", "/hooks/ep_1"))
    body, status, headers = run_wsgi_app(answer, environ(REQUEST_METHOD="HEAD"))
    werkzeugs = json_response(*error_json(MethodNotAllowed("no"), "HEAD", "/hooks/ep_1"))
    expected = run_wsgi_app(werkzeugs, environ(REQUEST_METHOD="HEAD"))
    assert b"".join(body) == b"".join(expected[0]) == b""
    assert (status, sorted(headers.items())) == (expected[1], sorted(expected[2].items()))


def test_error_response_keeps_the_public_message_and_the_errors_headers():
    response = error_response(SecretUnavailable("key k2 is missing"), "POST", "/hooks/ep_1")
    assert response.status_code == 503
    assert response.headers["Retry-After"] == "30"
    assert "k2" not in response.get_data(as_text=True)
