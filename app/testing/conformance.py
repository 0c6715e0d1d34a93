"""The provider conformance kit: a provider described once, checked by every case.

Subclass ``ProviderConformance`` in a test module (pytest collects classes named
``Test*``; hooklatch's pytest plugin makes one test per check), and say how your
provider signs::

    from hooklatch.testing import ProviderConformance

    class TestAcmeConformance(ProviderConformance):
        provider = "acme"                      # the entry-point name, or the class
        secret = "acme-secret"
        other_secret = "another-secret"
        signature_headers = ("X-Acme-Signature",)
        signs_timestamp = True

        def sign(self, body, *, secret, now, url):
            return {"X-Acme-Signature": acme_sdk.sign(secret, body, now)}

        def event_body(self, event_id, *, note="hello"):
            return json.dumps({"id": event_id, "type": "thing.done", "note": note}).encode()

A check that fails raises ``ConformanceFailure``, naming the check, what was expected
and what came back. By default a case calls the provider directly (``verify`` then
``parse``), so the kit needs no database. hooklatch's own suite overrides ``endpoint``
and ``deliver`` to run the same cases through the real HTTP endpoint, and checks that a
refused request stored nothing (tests/support/conformance.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from hooklatch.errors import VerificationError
from hooklatch.jsontypes import JSON
from hooklatch.providers.base import Delivery, Provider
from hooklatch.providers.loading import load_providers, validate

URL = "https://hooks.example.test/hooks/ep_conformance"


@dataclass(frozen=True)
class Outcome:
    """What became of one delivery: accepted (with the event ids it yielded), refused (with
    the reason), or an exception the provider raised instead of refusing."""

    accepted: bool
    reason: str | None = None
    external_ids: tuple[str, ...] = ()
    raised: str | None = None

    def __str__(self) -> str:
        if self.raised is not None:
            return f"raised {self.raised}"
        if self.accepted:
            return f"accepted with ids {list(self.external_ids)}"
        return f"refused: {self.reason}"


class ConformanceFailure(AssertionError):
    """A check the provider failed: its name, what was expected and what came back."""

    def __init__(self, expected: object, got: object, *, check: str = "") -> None:
        super().__init__(expected, got)
        self.expected, self.got, self.check = str(expected), str(got), check

    def __str__(self) -> str:
        return f"{self.check}: expected {self.expected}; got {self.got}"


@dataclass(frozen=True)
class Accepted:
    """Expected: accepted, yielding these event ids (any, but at least one, if None)."""

    external_ids: tuple[str, ...] | None

    def __str__(self) -> str:
        if self.external_ids is None:
            return "accepted with at least one event"
        return f"accepted with ids {list(self.external_ids)}"

    def matches(self, outcome: Outcome) -> bool:
        if not outcome.accepted or outcome.raised is not None:
            return False
        if self.external_ids is None:
            return bool(outcome.external_ids)
        return outcome.external_ids == self.external_ids


@dataclass(frozen=True)
class Refused:
    """Expected: refused, for one of these reasons."""

    reasons: tuple[str, ...]

    def __str__(self) -> str:
        return "refused: " + " or ".join(self.reasons)

    def matches(self, outcome: Outcome) -> bool:
        return not outcome.accepted and outcome.raised is None and outcome.reason in self.reasons


def expect(expected: Accepted | Refused, outcome: Outcome, *, when: str = "") -> None:
    """Raise ConformanceFailure unless ``outcome`` is what was expected."""
    if not expected.matches(outcome):
        raise ConformanceFailure(f"{expected} ({when})" if when else expected, outcome)


class OneCheck(Protocol):
    """A check of the kit (``hooklatch.testing.checks.Check``)."""

    def run(self, case: ProviderConformance) -> None: ...


class ProviderConformance:
    """How one provider signs and what its deliveries look like: what the checks need."""

    # Set on the subclass, as class attributes.
    provider: str | type[Provider]  # the entry-point name, or the class itself
    secret: str  # what the endpoint stores: a shared secret or a public key
    other_secret: str  # a different one, in the same format
    signature_headers: tuple[str, ...]  # removed by the "missing header" check
    signs_body: bool = True  # False where a token proves the sender only
    signs_timestamp: bool = False
    several_signatures: bool = False  # one header may carry several signatures
    form_encoded: bool = False  # the provider posts form-encoded bodies
    content_type: str = "application/json"
    options: Mapping[str, str] = {}
    url: str = URL

    def test_conformance(self, hooklatch_check: OneCheck) -> None:
        """One check of the kit: hooklatch's pytest plugin makes a test of each."""
        hooklatch_check.run(self)

    # -- what a subclass provides ---------------------------------------------------------

    def sign(self, body: bytes, *, secret: str, now: datetime, url: str) -> dict[str, str]:
        """Headers that sign ``body`` with ``secret``. By default the provider's own
        ``sign``; better, the sender's own SDK where one can sign. For public-key schemes
        ``secret`` is the public key: sign with the private key that goes with it."""
        headers = {name.lower(): value for name, value in self.request_headers().items()}
        delivery = Delivery("POST", url, headers, body, dict(self.options))
        return self.plugin().sign(delivery, secret=secret, now=now)

    def sign_several(
        self, body: bytes, *, secrets: Sequence[str], now: datetime, url: str
    ) -> dict[str, str]:
        """One request signed with each of ``secrets`` (only if several_signatures)."""
        raise NotImplementedError

    def event_body(self, event_id: str, *, note: str = "hello") -> bytes:
        """A valid delivery body for one event with this id; ``note`` goes into a string."""
        raise NotImplementedError

    def expected_ids(self, event_id: str) -> tuple[str, ...] | None:
        """The dedupe keys hooklatch should extract from ``event_body(event_id)`` (None:
        any, but at least one)."""
        return (event_id,)

    def form_event_body(self, event_id: str) -> bytes:
        """A valid form-encoded body (only if form_encoded)."""
        raise NotImplementedError

    def request_headers(self) -> dict[str, str]:
        """The headers every request carries besides the signature's."""
        return {"Content-Type": self.content_type}

    # -- where requests go: the provider itself by default -------------------------------

    def endpoint(self, secrets: Sequence[str]) -> str:
        """Set up an endpoint with these secrets (and ``options``); returns its URL."""
        self._secrets = list(secrets)
        return self.url

    def deliver(self, url: str, body: bytes, headers: Mapping[str, str]) -> Outcome:
        """Hand one request to the endpoint; override to go through a real server. Any
        exception but a refusal is an outcome too: the check says what it expected."""
        provider = self.plugin()
        lowered = {name.lower(): value for name, value in headers.items()}
        delivery = Delivery("POST", url, lowered, body, dict(self.options))
        try:
            provider.verify(delivery, secrets=self._secrets, now=self.now())
            events = provider.parse(delivery)
        except VerificationError as exc:
            return Outcome(False, exc.reason)
        except Exception as exc:
            return Outcome(False, raised=f"{type(exc).__name__}: {exc}")
        return Outcome(True, None, tuple(event.external_id for event in events))

    # -- helpers ----------------------------------------------------------------------

    def plugin(self) -> Provider:
        if isinstance(self.provider, str):
            return installed(self.provider)
        return checked(self.provider)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def headers(
        self, body: bytes, *, secret: str, url: str, now: datetime | None = None
    ) -> dict[str, str]:
        signed = self.sign(body, secret=secret, now=now or self.now(), url=url)
        return {**self.request_headers(), **signed}

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


def installed(name: str) -> Provider:
    """The installed provider of that entry-point name."""
    providers = _installed()
    if name not in providers:
        names = ", ".join(sorted(providers))
        raise LookupError(f"no provider {name!r} is installed (installed: {names})")
    return providers[name]


@functools.cache
def _installed() -> dict[str, Provider]:
    """The installed providers, loaded once per test session rather than once per case."""
    return load_providers()


_checked: dict[type[Provider], Provider] = {}


def checked(provider_class: type[Provider]) -> Provider:
    """A provider class that is not installed, made and checked as loading checks one
    (once per class)."""
    if provider_class not in _checked:
        origin = f"{provider_class.__module__}:{provider_class.__qualname__}"
        _checked[provider_class] = validate(provider_class, origin=origin)
    return _checked[provider_class]


def json_body(payload: JSON) -> bytes:
    """Compact JSON, unicode escaped as most providers send it."""
    return json.dumps(payload, separators=(",", ":")).encode()
