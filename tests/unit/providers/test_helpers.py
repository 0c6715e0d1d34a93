"""The verification helpers providers share: HMACs, header parsing, digest and clock checks."""

import ast
import base64
import hashlib
import hmac
import inspect
import re
from datetime import UTC, datetime, timedelta

import pytest

import hooklatch.providers
from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.providers import (
    any_digest_matches,
    check_timestamp,
    hmac_base64,
    hmac_hex,
    hmac_sha256,
    timestamped_signatures,
)
from tests.support.install import ROOT

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
FIVE_MINUTES = timedelta(minutes=5)


def test_hmacs_key_a_text_secret_by_its_utf8_bytes():
    expected = hmac.new("sécret".encode(), b"body", hashlib.sha256)
    assert hmac_sha256("sécret", b"body") == expected.digest()
    assert hmac_sha256("sécret".encode(), b"body") == expected.digest()
    assert hmac_hex("sécret", b"body") == expected.hexdigest()
    assert hmac_base64("sécret", b"body") == base64.b64encode(expected.digest()).decode()


def stripe_like(header):
    return timestamped_signatures(
        header, name="Sig", separator=",", timestamp_key="t", signature_key="v1"
    )


def test_a_timestamped_header_gives_its_time_and_every_signature_in_order():
    assert stripe_like("t=1700000000,v1=aa,v0=zz,v1=bb") == (1700000000, ["aa", "bb"])
    paddle = timestamped_signatures(
        "ts=17; h1=cc", name="Sig", separator=";", timestamp_key="ts", signature_key="h1"
    )
    assert paddle == (17, ["cc"])


@pytest.mark.parametrize(
    "header", ["", "v1=aa", "t=1700000000", "t=soon,v1=aa", "t=1700000000,v0=aa", "garbage"]
)
def test_a_timestamped_header_without_a_time_or_a_signature_is_malformed(header):
    with pytest.raises(MalformedRequest) as caught:
        stripe_like(header)
    assert caught.value.reason == "malformed_header"
    assert "t=<unix time>" in str(caught.value)


def test_any_digest_matches_accepts_text_or_bytes_and_any_pair():
    assert any_digest_matches(["a1", "b2"], ["zz", "b2"])
    assert any_digest_matches([b"a1"], ["a1"])
    assert not any_digest_matches(["a1"], ["A1", "a1 ", "a"])
    assert not any_digest_matches([], ["a1"])
    assert not any_digest_matches(["a1"], [])


@pytest.mark.parametrize("skew", [0, 299, -299])
def test_a_timestamp_within_the_tolerance_passes(skew):
    check_timestamp(int(NOW.timestamp()) - skew, now=NOW, tolerance=FIVE_MINUTES)


@pytest.mark.parametrize(("skew", "reason"), [(301, "stale_timestamp"), (-301, "future_timestamp")])
def test_a_timestamp_outside_the_tolerance_is_refused_with_its_skew(skew, reason):
    with pytest.raises(VerificationError) as caught:
        check_timestamp(int(NOW.timestamp()) - skew, now=NOW, tolerance=FIVE_MINUTES)
    assert caught.value.reason == reason
    assert caught.value.facts == {"timestamp_skew_seconds": float(skew)}
    assert "tolerance 300 s" in str(caught.value)


def test_the_plugin_pages_helpers_are_the_contracts_own():
    """docs/plugins.md gives every helper hooklatch.providers exports, with its arguments
    and return type as declared."""
    page = (ROOT / "docs" / "plugins.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.MULTILINE | re.DOTALL)
    [block] = [each for each in blocks if "def check_signatures(" in each]
    written = {
        node.name: node for node in ast.parse(block).body if isinstance(node, ast.FunctionDef)
    }
    exported = {
        name
        for name in hooklatch.providers.__all__
        if inspect.isfunction(getattr(hooklatch.providers, name))
    }
    assert set(written) == exported
    for name, node in written.items():
        [declared] = ast.parse(inspect.getsource(getattr(hooklatch.providers, name))).body
        assert isinstance(declared, ast.FunctionDef)
        assert ast.unparse(node.args) == ast.unparse(declared.args), name
        assert node.returns is not None and declared.returns is not None, name
        assert ast.unparse(node.returns) == ast.unparse(declared.returns), name
