"""The provider conformance kit: the cases every provider plugin must pass.

Subclass ``ProviderConformance`` in a test module (pytest collects classes named
``Test*``), say how your provider signs, and every case runs::

    from hooklatch.testing import ProviderConformance

    class TestAcmeConformance(ProviderConformance):
        provider = "acme"                      # the entry-point name
        secret = "acme-secret"
        other_secret = "another-secret"
        signature_headers = ("X-Acme-Signature",)
        signs_timestamp = True

        def sign(self, body, *, secret, now, url):
            return {"X-Acme-Signature": acme_sdk.sign(secret, body, now)}

        def event_body(self, event_id, *, note="hello"):
            return json.dumps({"id": event_id, "type": "thing.done", "note": note}).encode()

By default a case calls the provider directly (``verify`` then ``parse``), so the kit
needs no database. hooklatch's own suite overrides ``endpoint`` and ``deliver`` to run
the same cases through the real HTTP endpoint, and checks that a refused request
stored nothing (tests/support/conformance.py). The kit needs pytest.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

import pytest

from hooklatch.errors import VerificationError
from hooklatch.providers.base import Delivery, Provider
from hooklatch.providers.loading import load_providers

URL = "https://hooks.example.test/hooks/ep_conformance"
NOTE = "conformance-note"


@dataclass(frozen=True)
class Outcome:
    """What became of one delivery: accepted (with the event ids it yielded) or refused."""

    accepted: bool
    reason: str | None = None
    external_ids: tuple[str, ...] = ()


class ProviderConformance:
    provider: ClassVar[str]
    secret: ClassVar[str]  # what the endpoint stores: a shared secret or a public key
    other_secret: ClassVar[str]  # a different one, in the same format
    signature_headers: ClassVar[tuple[str, ...]]  # removed by the "missing header" case
    signs_timestamp: ClassVar[bool] = False
    several_signatures: ClassVar[bool] = False  # one header may carry several signatures
    form_encoded: ClassVar[bool] = False  # the provider posts form-encoded bodies
    content_type: ClassVar[str] = "application/json"
    options: ClassVar[Mapping[str, str]] = {}
    url: ClassVar[str] = URL

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Cases for features the provider does not have are left out, not skipped."""
        super().__init_subclass__(**kwargs)
        absent = {
            "test_timestamp_outside_the_tolerance_is_refused": cls.signs_timestamp,
            "test_several_signatures_in_one_request_verify_if_any_matches": (
                cls.several_signatures
            ),
            "test_a_form_encoded_body_is_accepted": cls.form_encoded,
        }
        for name, present in absent.items():
            setattr(cls, name, ProviderConformance.__dict__[name] if present else None)

    # -- what a subclass provides ---------------------------------------------------------

    def sign(self, body: bytes, *, secret: str, now: datetime, url: str) -> dict[str, str]:
        """Headers that sign ``body`` with ``secret``, made by the provider's own SDK where
        one can sign. For public-key schemes ``secret`` is the public key: sign with the
        private key that goes with it."""
        raise NotImplementedError

    def sign_several(
        self, body: bytes, *, secrets: Sequence[str], now: datetime, url: str
    ) -> dict[str, str]:
        """One request signed with each of ``secrets`` (only if several_signatures)."""
        raise NotImplementedError

    def event_body(self, event_id: str, *, note: str = "hello") -> bytes:
        """A valid delivery body for one event with this id; ``note`` goes into a string."""
        raise NotImplementedError

    def expected_ids(self, event_id: str) -> tuple[str, ...]:
        """The dedupe keys hooklatch should extract from ``event_body(event_id)``."""
        return (event_id,)

    def form_event_body(self, event_id: str) -> bytes:
        """A valid form-encoded body (only if form_encoded)."""
        raise NotImplementedError

    # -- where requests go: the provider itself by default -------------------------------

    def endpoint(self, secrets: Sequence[str]) -> str:
        """Set up an endpoint with these secrets (and ``options``); returns its URL."""
        self._secrets = list(secrets)
        return self.url

    def deliver(self, url: str, body: bytes, headers: Mapping[str, str]) -> Outcome:
        """Hand one request to the endpoint; override to go through a real server."""
        provider = self.plugin()
        delivery = Delivery(
            "POST",
            url,
            {name.lower(): value for name, value in headers.items()},
            body,
            dict(self.options),
        )
        try:
            provider.verify(delivery, secrets=self._secrets, now=self.now())
            events = provider.parse(delivery)
        except VerificationError as exc:
            return Outcome(False, exc.reason)
        return Outcome(True, None, tuple(event.external_id for event in events))

    # -- helpers ----------------------------------------------------------------------

    def plugin(self) -> Provider:
        return _installed()[self.provider]

    def now(self) -> datetime:
        return datetime.now(UTC)

    def headers(
        self, body: bytes, *, secret: str, url: str, now: datetime | None = None
    ) -> dict[str, str]:
        signed = self.sign(body, secret=secret, now=now or self.now(), url=url)
        return {"Content-Type": self.content_type, **signed}

    def send(
        self,
        body: bytes,
        *,
        signed_with: str,
        endpoint_secrets: Sequence[str],
        now: datetime | None = None,
    ) -> Outcome:
        url = self.endpoint(endpoint_secrets)
        return self.deliver(url, body, self.headers(body, secret=signed_with, url=url, now=now))

    # -- the cases --------------------------------------------------------------------

    def test_valid_request_is_accepted(self) -> None:
        body = self.event_body("evt_conf_valid")
        outcome = self.send(body, signed_with=self.secret, endpoint_secrets=[self.secret])
        assert outcome == Outcome(True, None, self.expected_ids("evt_conf_valid"))

    def test_tampered_body_is_refused(self) -> None:
        body = self.event_body("evt_conf_tampered")
        url = self.endpoint([self.secret])
        headers = self.headers(body, secret=self.secret, url=url)
        tampered = body.replace(b"hello", b"hellp")
        assert tampered != body
        outcome = self.deliver(url, tampered, headers)
        assert (outcome.accepted, outcome.reason) == (False, "bad_signature")

    def test_wrong_secret_is_refused(self) -> None:
        body = self.event_body("evt_conf_wrong")
        outcome = self.send(body, signed_with=self.other_secret, endpoint_secrets=[self.secret])
        assert (outcome.accepted, outcome.reason) == (False, "bad_signature")

    def test_missing_signature_header_is_refused(self) -> None:
        body = self.event_body("evt_conf_missing")
        url = self.endpoint([self.secret])
        headers = self.headers(body, secret=self.secret, url=url)
        lowered = {h.lower() for h in self.signature_headers}
        stripped = {k: v for k, v in headers.items() if k.lower() not in lowered}
        assert stripped != headers
        outcome = self.deliver(url, body, stripped)
        assert (outcome.accepted, outcome.reason) == (False, "missing_header")

    @pytest.mark.parametrize(
        ("shift", "reason"), [(-1, "stale_timestamp"), (1, "future_timestamp")]
    )
    def test_timestamp_outside_the_tolerance_is_refused(self, shift: int, reason: str) -> None:
        when = self.now() + shift * (self.plugin().tolerance + timedelta(seconds=60))
        body = self.event_body(f"evt_conf_{reason}")
        outcome = self.send(body, signed_with=self.secret, endpoint_secrets=[self.secret], now=when)
        assert (outcome.accepted, outcome.reason) == (False, reason)

    def test_several_signatures_in_one_request_verify_if_any_matches(self) -> None:
        body = self.event_body("evt_conf_several")
        url = self.endpoint([self.secret])
        signed = self.sign_several(
            body, secrets=[self.other_secret, self.secret], now=self.now(), url=url
        )
        outcome = self.deliver(url, body, {"Content-Type": self.content_type, **signed})
        assert outcome == Outcome(True, None, self.expected_ids("evt_conf_several"))

    def test_during_a_rotation_both_secrets_verify_and_a_removed_one_does_not(self) -> None:
        old, new = self.secret, self.other_secret
        for n, signed_with in enumerate((old, new)):
            body = self.event_body(f"evt_conf_rotation_{n}")
            assert self.send(body, signed_with=signed_with, endpoint_secrets=[old, new]).accepted
        body = self.event_body("evt_conf_rotation_removed")
        outcome = self.send(body, signed_with=old, endpoint_secrets=[new])
        assert (outcome.accepted, outcome.reason) == (False, "bad_signature")

    def test_emoji_are_verified_on_the_bytes_received(self) -> None:
        body = self.event_body("evt_conf_emoji", note="héllo 🎉 \u2028 ✓")
        outcome = self.send(body, signed_with=self.secret, endpoint_secrets=[self.secret])
        assert outcome == Outcome(True, None, self.expected_ids("evt_conf_emoji"))

    def test_non_utf8_bytes_are_refused_as_malformed_not_crashed_on(self) -> None:
        body = self.event_body("evt_conf_bytes", note=NOTE)
        body = body.replace(NOTE.encode(), b"\xff\xfe\x80")
        outcome = self.send(body, signed_with=self.secret, endpoint_secrets=[self.secret])
        assert (outcome.accepted, outcome.reason) == (False, "malformed_body")

    def test_an_empty_body_is_refused(self) -> None:
        outcome = self.send(b"", signed_with=self.secret, endpoint_secrets=[self.secret])
        assert not outcome.accepted
        assert outcome.reason in ("malformed_body", "bad_signature"), outcome

    def test_a_form_encoded_body_is_accepted(self) -> None:
        body = self.form_event_body("evt_conf_form")
        url = self.endpoint([self.secret])
        headers = self.headers(body, secret=self.secret, url=url)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        outcome = self.deliver(url, body, headers)
        assert outcome == Outcome(True, None, self.expected_ids("evt_conf_form"))


@functools.cache
def _installed() -> dict[str, Provider]:
    """The installed providers, loaded once per test session rather than once per case."""
    return load_providers()


def json_body(payload: Any) -> bytes:
    """Compact JSON, unicode escaped as most providers send it."""
    return json.dumps(payload, separators=(",", ":")).encode()
