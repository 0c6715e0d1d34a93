"""Twilio's conformance cases (form posts and JSON posts) and twilio-python's published
vectors, run against the provider itself."""

from urllib.parse import parse_qsl

import pytest
from twilio.request_validator import RequestValidator

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery
from hooklatch.providers.loading import load_providers
from tests.support.providers.twilio import (
    NOW,
    SDK_BODY,
    SDK_BODY_HASH,
    SDK_PARAMS,
    SDK_URL,
    TwilioCase,
    TwilioJsonCase,
)


class TestTwilioConformance(TwilioCase):
    pass


class TestTwilioJsonConformance(TwilioJsonCase):
    pass


def verify(url, body, signature, *, secrets=("12345",), headers=None):
    provider = load_providers()["twilio"]
    delivery = Delivery("POST", url, {"x-twilio-signature": signature, **(headers or {})}, body)
    provider.verify(delivery, secrets=list(secrets), now=NOW)


@pytest.mark.parametrize(
    ("url", "body", "signature"),
    [
        pytest.param(SDK_URL, SDK_PARAMS, "RSOYDt4T1cUTdK1PDd93/VVr8B8=", id="form"),
        pytest.param(
            SDK_URL,
            b"Sid=CA123&SidAccount=AC123&Digits=5678&Digits=1234",
            "IK+Dwps556ElfBT0I3Rgjkr1wJU=",
            id="repeated-param",
        ),
        pytest.param(
            SDK_URL.replace(".com", ".com:1234"),
            SDK_PARAMS,
            "RSOYDt4T1cUTdK1PDd93/VVr8B8=",
            id="signed-without-the-port-it-came-on",
        ),
        pytest.param(
            SDK_URL.replace(".com", ".com:1234").replace("https", "http"),
            SDK_PARAMS,
            "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=",
            id="http-signed-with-its-port",
        ),
        pytest.param(SDK_URL, SDK_PARAMS, "kvajT1Ptam85bY51eRf/AJRuM3w=", id="signed-with-:443"),
        pytest.param(
            SDK_URL.replace("https", "http"),
            SDK_PARAMS,
            "0ZXoZLH/DfblKGATFgpif+LLRf4=",
            id="signed-with-:80",
        ),
        pytest.param(
            f"{SDK_URL}&bodySHA256={SDK_BODY_HASH}",
            SDK_BODY,
            "a9nBmqA0ju/hNViExpshrM61xv4=",
            id="json-body",
        ),
    ],
)
def test_twilio_sdk_vectors_verify(url, body, signature):
    verify(url, body, signature)
    with pytest.raises(VerificationError) as refused:
        verify(url, body, signature, secrets=["54321"])
    assert refused.value.reason == "bad_signature"


def test_twilio_json_body_must_match_its_bodysha256():
    url = f"{SDK_URL}&bodySHA256={SDK_BODY_HASH}"
    with pytest.raises(VerificationError) as refused:
        verify(url, SDK_BODY.replace(b"true", b"false"), "a9nBmqA0ju/hNViExpshrM61xv4=")
    assert refused.value.reason == "bad_signature"


def test_twilio_shared_key_signatures_use_the_algorithm_twilio_names():
    signature = RequestValidator("12345").compute_signature(
        SDK_URL, dict(parse_qsl(SDK_PARAMS.decode())), "HMAC_SHA256"
    )
    settings = {"x-twilio-webhooks-signature-settings": "key=sk_1,algorithm=HMAC_SHA256"}
    verify(SDK_URL, SDK_PARAMS, signature, headers=settings)
    with pytest.raises(VerificationError) as refused:
        verify(SDK_URL, SDK_PARAMS, signature)  # read as SHA-1: no match
    assert refused.value.reason == "bad_signature"
    unknown = {"x-twilio-webhooks-signature-settings": "algorithm=HMAC_MD5"}
    with pytest.raises(VerificationError) as refused:
        verify(SDK_URL, SDK_PARAMS, signature, headers=unknown)
    assert refused.value.reason == "malformed_header"
