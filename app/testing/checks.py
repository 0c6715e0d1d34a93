"""The checks every provider must pass, each run on a ``ProviderConformance``.

A check that does not apply to a provider (it signs no timestamp, say) is left out for
it, not skipped: ``checks_for`` gives those that apply. ``run_checks`` runs them all and
says how each went, for ``python -m hooklatch.testing``; hooklatch's pytest plugin makes
a test of each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from hooklatch.testing.conformance import (
    Accepted,
    ConformanceFailure,
    ProviderConformance,
    Refused,
    expect,
)

NOTE = "conformance-note"
BAD_SIGNATURE = Refused(("bad_signature",))


@dataclass(frozen=True)
class Check:
    name: str
    body: Callable[[ProviderConformance], None]
    needs: str | None = None  # the description's flag that says the check applies

    def applies_to(self, description: ProviderConformance | type[ProviderConformance]) -> bool:
        return self.needs is None or bool(getattr(description, self.needs))

    def run(self, case: ProviderConformance) -> None:
        """Raises ConformanceFailure, named after this check, where the provider fails it."""
        try:
            self.body(case)
        except ConformanceFailure as failure:
            failure.check = self.name
            raise


CHECKS: list[Check] = []


def check(
    needs: str | None = None,
) -> Callable[[Callable[[ProviderConformance], None]], Callable[[ProviderConformance], None]]:
    def register(
        body: Callable[[ProviderConformance], None],
    ) -> Callable[[ProviderConformance], None]:
        CHECKS.append(Check(body.__name__, body, needs))
        return body

    return register


def checks_for(description: ProviderConformance | type[ProviderConformance]) -> list[Check]:
    return [each for each in CHECKS if each.applies_to(description)]


@dataclass(frozen=True)
class Result:
    check: str
    failure: ConformanceFailure | None = None
    error: str | None = None  # the description itself raised (it could not sign, say)

    @property
    def passed(self) -> bool:
        return self.failure is None and self.error is None


def run_checks(case: ProviderConformance) -> list[Result]:
    results = []
    for each in checks_for(case):
        try:
            each.run(case)
        except ConformanceFailure as failure:
            results.append(Result(each.name, failure))
        except Exception as exc:
            results.append(Result(each.name, error=f"{type(exc).__name__}: {exc}"))
        else:
            results.append(Result(each.name))
    return results


def ensure(condition: bool, expected: str, got: object) -> None:
    """A check's premise about the description itself (its body has the note in it)."""
    if not condition:
        raise ConformanceFailure(expected, got)


# -- the checks -------------------------------------------------------------------------


@check()
def valid_request_is_accepted(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_valid")
    outcome = case.send(body, signed_with=case.secret, endpoint_secrets=[case.secret])
    expect(Accepted(case.expected_ids("evt_conf_valid")), outcome)


@check(needs="signs_body")
def tampered_body_is_refused(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_tampered")
    url = case.endpoint([case.secret])
    headers = case.headers(body, secret=case.secret, url=url)
    tampered = body.replace(b"hello", b"hellp")
    ensure(tampered != body, "event_body(note='hello') to contain b'hello'", body[:200])
    expect(BAD_SIGNATURE, case.deliver(url, tampered, headers), when="for a changed body")


@check()
def wrong_secret_is_refused(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_wrong")
    outcome = case.send(body, signed_with=case.other_secret, endpoint_secrets=[case.secret])
    expect(BAD_SIGNATURE, outcome, when="signed with another secret")


@check()
def missing_signature_header_is_refused(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_missing")
    url = case.endpoint([case.secret])
    headers = case.headers(body, secret=case.secret, url=url)
    lowered = {h.lower() for h in case.signature_headers}
    stripped = {k: v for k, v in headers.items() if k.lower() not in lowered}
    ensure(
        stripped != headers, f"signed headers to include {list(case.signature_headers)}", headers
    )
    outcome = case.deliver(url, body, stripped)
    expect(Refused(("missing_header",)), outcome, when=f"without {list(case.signature_headers)}")


def refused_at(case: ProviderConformance, shift: int, reason: str) -> None:
    tolerance = case.plugin().tolerance
    off = tolerance + timedelta(seconds=60)
    body = case.event_body(f"evt_conf_{reason}")
    outcome = case.send(
        body, signed_with=case.secret, endpoint_secrets=[case.secret], now=case.now() + shift * off
    )
    side = "ahead of" if shift > 0 else "behind"
    seconds = f"{off.total_seconds():.0f} s {side} the clock"
    when = f"signed {seconds}, tolerance {tolerance.total_seconds():.0f} s"
    expect(Refused((reason,)), outcome, when=when)


@check(needs="signs_timestamp")
def stale_timestamp_is_refused(case: ProviderConformance) -> None:
    refused_at(case, -1, "stale_timestamp")


@check(needs="signs_timestamp")
def future_timestamp_is_refused(case: ProviderConformance) -> None:
    refused_at(case, 1, "future_timestamp")


@check(needs="several_signatures")
def several_signatures_verify_if_any_matches(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_several")
    url = case.endpoint([case.secret])
    signed = case.sign_several(
        body, secrets=[case.other_secret, case.secret], now=case.now(), url=url
    )
    outcome = case.deliver(url, body, {**case.request_headers(), **signed})
    expect(Accepted(case.expected_ids("evt_conf_several")), outcome)


@check()
def rotation_verifies_both_secrets_then_not_the_removed_one(case: ProviderConformance) -> None:
    old, new = case.secret, case.other_secret
    for n, (name, signed_with) in enumerate((("old", old), ("new", new))):
        event_id = f"evt_conf_rotation_{n}"
        outcome = case.send(
            case.event_body(event_id), signed_with=signed_with, endpoint_secrets=[old, new]
        )
        expected = Accepted(case.expected_ids(event_id))
        expect(expected, outcome, when=f"signed with the {name} secret while both are active")
    body = case.event_body("evt_conf_rotation_removed")
    outcome = case.send(body, signed_with=old, endpoint_secrets=[new])
    expect(BAD_SIGNATURE, outcome, when="signed with the old secret once it is removed")


@check()
def emoji_are_verified_on_the_bytes_received(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_emoji", note="héllo 🎉 \u2028 ✓")
    outcome = case.send(body, signed_with=case.secret, endpoint_secrets=[case.secret])
    expect(Accepted(case.expected_ids("evt_conf_emoji")), outcome, when="for a body with emoji")


@check()
def non_utf8_bytes_are_refused_as_malformed(case: ProviderConformance) -> None:
    body = case.event_body("evt_conf_bytes", note=NOTE)
    ensure(NOTE.encode() in body, f"event_body(note={NOTE!r}) to contain it", body[:200])
    body = body.replace(NOTE.encode(), b"\xff\xfe\x80")
    outcome = case.send(body, signed_with=case.secret, endpoint_secrets=[case.secret])
    expect(Refused(("malformed_body",)), outcome, when="for a signed body that is not UTF-8")


@check()
def empty_body_is_refused(case: ProviderConformance) -> None:
    outcome = case.send(b"", signed_with=case.secret, endpoint_secrets=[case.secret])
    expect(Refused(("malformed_body", "bad_signature")), outcome, when="for an empty body")


@check(needs="form_encoded")
def form_encoded_body_is_accepted(case: ProviderConformance) -> None:
    body = case.form_event_body("evt_conf_form")
    url = case.endpoint([case.secret])
    headers = case.headers(body, secret=case.secret, url=url)
    headers["Content-Type"] = "application/x-www-form-urlencoded"
    outcome = case.deliver(url, body, headers)
    expect(Accepted(case.expected_ids("evt_conf_form")), outcome, when="for a form body")
