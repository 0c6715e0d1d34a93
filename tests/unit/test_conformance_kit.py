"""The conformance kit says, for each check a provider fails, what it expected and what
came back: a provider that accepts what it should refuse, gives the wrong ids, refuses
what it should accept, or raises where it should refuse."""

import pytest

from hooklatch.testing import CHECKS, ConformanceFailure, checks_for, run_checks
from hooklatch.testing.samples import SampleConformance
from tests.support.kit_providers import (
    AcceptsAnything,
    AcceptsAnythingCase,
    KitCase,
    KitProvider,
    RefusesAllCase,
    WrongIdsCase,
)


def failures(case):
    """check name -> (expected, got) for each check that failed."""
    results = run_checks(case)
    assert [r.error for r in results] == [None] * len(results)
    return {r.check: (r.failure.expected, r.failure.got) for r in results if r.failure}


def test_a_provider_that_keeps_the_contract_passes_every_check_that_applies():
    results = run_checks(KitCase())
    assert [r.check for r in results if not r.passed] == []
    left_out = {c.name for c in CHECKS} - {r.check for r in results}
    assert left_out == {"form_encoded_body_is_accepted"}


def test_a_provider_that_accepts_what_it_should_refuse_is_shown_each_refusal_it_missed():
    found = failures(AcceptsAnythingCase())
    non_utf8_expected, non_utf8_got = found.pop("non_utf8_bytes_are_refused_as_malformed")
    assert non_utf8_expected == "refused: malformed_body (for a signed body that is not UTF-8)"
    assert non_utf8_got.startswith("raised UnicodeDecodeError: 'utf-8' codec can't decode byte")
    assert found == {
        "tampered_body_is_refused": (
            "refused: bad_signature (for a changed body)",
            "accepted with ids ['evt_conf_tampered']",
        ),
        "wrong_secret_is_refused": (
            "refused: bad_signature (signed with another secret)",
            "accepted with ids ['evt_conf_wrong']",
        ),
        "missing_signature_header_is_refused": (
            "refused: missing_header (without ['X-Kit-Signature'])",
            "accepted with ids ['evt_conf_missing']",
        ),
        "stale_timestamp_is_refused": (
            "refused: stale_timestamp (signed 360 s behind the clock, tolerance 300 s)",
            "accepted with ids ['evt_conf_stale_timestamp']",
        ),
        "future_timestamp_is_refused": (
            "refused: future_timestamp (signed 360 s ahead of the clock, tolerance 300 s)",
            "accepted with ids ['evt_conf_future_timestamp']",
        ),
        "rotation_verifies_both_secrets_then_not_the_removed_one": (
            "refused: bad_signature (signed with the old secret once it is removed)",
            "accepted with ids ['evt_conf_rotation_removed']",
        ),
        "empty_body_is_refused": (
            "refused: malformed_body or bad_signature (for an empty body)",
            "raised JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
        ),
    }


def test_a_provider_that_gives_the_wrong_ids_is_shown_the_ids_expected_and_given():
    assert failures(WrongIdsCase()) == {
        "valid_request_is_accepted": (
            "accepted with ids ['evt_conf_valid']",
            "accepted with ids ['evt_same']",
        ),
        "several_signatures_verify_if_any_matches": (
            "accepted with ids ['evt_conf_several']",
            "accepted with ids ['evt_same']",
        ),
        "rotation_verifies_both_secrets_then_not_the_removed_one": (
            "accepted with ids ['evt_conf_rotation_0'] (signed with the old secret "
            "while both are active)",
            "accepted with ids ['evt_same']",
        ),
        "emoji_are_verified_on_the_bytes_received": (
            "accepted with ids ['evt_conf_emoji'] (for a body with emoji)",
            "accepted with ids ['evt_same']",
        ),
        # It reads no body at all, so it takes what it should refuse as well.
        "non_utf8_bytes_are_refused_as_malformed": (
            "refused: malformed_body (for a signed body that is not UTF-8)",
            "accepted with ids ['evt_same']",
        ),
        "empty_body_is_refused": (
            "refused: malformed_body or bad_signature (for an empty body)",
            "accepted with ids ['evt_same']",
        ),
    }


def test_a_provider_that_refuses_what_it_should_accept_is_shown_the_reason_it_gave():
    found = failures(RefusesAllCase())
    assert found["valid_request_is_accepted"] == (
        "accepted with ids ['evt_conf_valid']",
        "refused: bad_signature",
    )
    assert found["missing_signature_header_is_refused"] == (
        "refused: missing_header (without ['X-Kit-Signature'])",
        "refused: bad_signature",
    )
    assert set(found) == {
        "valid_request_is_accepted",
        "missing_signature_header_is_refused",
        "several_signatures_verify_if_any_matches",
        "rotation_verifies_both_secrets_then_not_the_removed_one",
        "emoji_are_verified_on_the_bytes_received",
        "non_utf8_bytes_are_refused_as_malformed",
        "stale_timestamp_is_refused",
        "future_timestamp_is_refused",
    }


def test_a_description_whose_body_lacks_the_note_is_told_what_the_check_needs():
    class NoNote(KitCase):
        def event_body(self, event_id, *, note="hello"):
            return b'{"id": "%s", "kind": "k"}' % event_id.encode()

    found = failures(NoNote())
    assert found["tampered_body_is_refused"] == (
        "event_body(note='hello') to contain b'hello'",
        """b'{"id": "evt_conf_tampered", "kind": "k"}'""",
    )


def test_a_failure_names_its_check_and_reads_as_one_line():
    [check] = [c for c in checks_for(WrongIdsCase) if c.name == "valid_request_is_accepted"]
    with pytest.raises(ConformanceFailure) as raised:
        check.run(WrongIdsCase())
    failure = raised.value
    assert (failure.check, failure.expected, failure.got) == (
        "valid_request_is_accepted",
        "accepted with ids ['evt_conf_valid']",
        "accepted with ids ['evt_same']",
    )
    assert str(failure) == (
        "valid_request_is_accepted: expected accepted with ids ['evt_conf_valid']; "
        "got accepted with ids ['evt_same']"
    )


def test_checks_for_features_a_provider_lacks_are_left_out():
    class Plain(KitCase):
        signs_timestamp = False
        several_signatures = False
        signs_body = False

    left_out = {c.name for c in CHECKS} - {c.name for c in checks_for(Plain)}
    assert left_out == {
        "stale_timestamp_is_refused",
        "future_timestamp_is_refused",
        "several_signatures_verify_if_any_matches",
        "tampered_body_is_refused",
        "form_encoded_body_is_accepted",
    }


def test_a_provider_checked_with_its_own_sample_and_signer_is_found_to_sign_a_time():
    case = SampleConformance(KitProvider())
    assert case.signs_timestamp and case.signature_headers == ("X-Kit-Timestamp", "X-Kit-Signature")
    assert [r.check for r in run_checks(case) if not r.passed] == []
    careless = {r.check for r in run_checks(SampleConformance(AcceptsAnything())) if not r.passed}
    assert "tampered_body_is_refused" in careless and "stale_timestamp_is_refused" in careless
