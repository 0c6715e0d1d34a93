"""Each built-in provider says whether the signature covers an event's id: where it does,
another body under a stored id can only be the provider's own re-send (a duplicate);
where it does not, it is kept as a conflict (docs/plugins.md, "Event ids"). The answers
here are the table of docs/providers.md ("What a signature covers")."""

import json
from datetime import UTC, datetime

import pytest

from hooklatch.providers.base import Delivery, IncomingEvent
from hooklatch.providers.loading import load_providers

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def parsed(provider, options=None, *, drop=(), add=None):
    """The provider's sample delivery as parse reads it (parse does not verify), with
    headers left out or added."""
    plugin = load_providers()[provider]
    headers, body = plugin.sample_event(now=NOW)
    lowered = {k.lower(): v for k, v in headers.items() if k.lower() not in drop}
    lowered.update({k.lower(): v for k, v in (add or {}).items()})
    return plugin.parse(Delivery("POST", "https://h.example/hooks/e", lowered, body, options or {}))


@pytest.mark.parametrize(
    ("provider", "options"),
    [
        ("stripe", {}),
        ("standard-webhooks", {}),
        ("slack", {}),
        ("discord", {}),
        ("paddle", {}),
        ("sendgrid", {}),
        ("square", {}),
        ("zoom", {}),
        ("meta", {}),
        ("linear", {}),
        ("gitlab", {"mode": "signing"}),
        ("generic-hmac", {"header": "X-Sig", "id_field": "id", "type_field": "type"}),
    ],
)
def test_ids_read_from_what_the_signature_covers_are_signed(provider, options):
    # Standard Webhooks' headers come from sign(): the id is part of the signed content.
    signed = {"webhook-id": "msg_1", "webhook-signature": "v1,c2ln"}
    events = parsed(provider, options, add=signed)
    assert events and all(event.id_signed for event in events)


@pytest.mark.parametrize(
    ("provider", "options"),
    [
        ("github", {}),
        ("shopify", {}),
        ("gitlab", {"mode": "token"}),
        ("generic-hmac", {"header": "X-Sig", "id_header": "X-Id", "type_field": "type"}),
    ],
)
def test_ids_read_from_a_header_the_signature_does_not_cover_are_not(provider, options):
    add = {"X-Id": "evt-7"} if "id_header" in options else None
    events = parsed(provider, options, add=add)
    assert events and not any(event.id_signed for event in events)


def test_twilio_signs_its_form_fields_but_not_its_idempotency_token():
    [with_token] = parsed("twilio")
    assert with_token.external_id and not with_token.id_signed
    [from_the_form] = parsed("twilio", drop={"i-twilio-idempotency-token"})
    assert from_the_form.id_signed


def test_linear_falls_back_to_its_unsigned_delivery_header_only_when_the_body_lacks_ids():
    [from_the_body] = parsed("linear")
    assert from_the_body.id_signed
    plugin = load_providers()["linear"]
    body = json.dumps({"type": "Issue", "data": {"id": "i-1"}}).encode()
    delivery = Delivery("POST", "u", {"linear-delivery": "d-1"}, body)
    [from_the_header] = plugin.parse(delivery)
    assert (from_the_header.external_id, from_the_header.id_signed) == ("d-1", False)


def test_a_plugin_that_does_not_say_has_unsigned_ids():
    assert IncomingEvent("evt_1", "thing.happened").id_signed is False


def test_a_generic_hmac_endpoint_whose_sender_changes_bodies_on_retries_can_say_so():
    options = {"header": "X-Sig", "id_header": "X-Id", "retries_change_body": "true"}
    [event] = parsed("generic-hmac", options, add={"X-Id": "evt-7"})
    assert event.id_signed  # another body under a stored id: a duplicate again
    plugin = load_providers()["generic-hmac"]
    assert plugin.check_options(options) == options
    with pytest.raises(ValueError, match="applies only to id_header"):
        plugin.check_options({"header": "X-Sig", "id_field": "id", "retries_change_body": "true"})
    with pytest.raises(ValueError, match="must be one of true, false"):
        plugin.check_options({**options, "retries_change_body": "yes"})
