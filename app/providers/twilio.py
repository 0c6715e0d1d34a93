"""Twilio: ``X-Twilio-Signature`` = base64 HMAC-SHA1(auth token, URL + sorted form params).

Form posts (Messaging and Voice webhooks, status callbacks) sign the public URL followed
by every POST parameter, sorted by name, as ``name + value``. JSON posts (Event Streams)
carry ``bodySHA256=<hex sha256(body)>`` in the URL instead: the signature covers the URL
alone and the body is checked against that hash. Like Twilio's SDK, the URL is tried with
and without an explicit port, because Twilio does not sign it consistently.

Dedupe key, in order:

- JSON posts: each CloudEvent's ``id`` (Twilio's own advice for Event Streams);
- the ``I-Twilio-Idempotency-Token`` header, which a retry of a request repeats;
- without it, the resource SID and its status, e.g. ``SM123:delivered``, plus the
  callback's ``SequenceNumber`` where Twilio sends one (calls and conferences send
  several callbacks per status). A request with neither is refused: nothing in it would
  tell a retry from a new event.

Type: the resource and its status, lower-case: ``message.delivered``, ``call.completed``,
``recording.completed``, ``transcription.completed``, ``conference.participant-join``;
``webhook`` for a request that names no known resource. JSON posts use each CloudEvent's
``type`` (``com.twilio.messaging.message.delivered``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.parsing import id_and_type, load_json, occurred_at
from hooklatch.providers.signing import any_digest_matches, require_secrets

SIGNATURE = "X-Twilio-Signature"
IDEMPOTENCY_HEADER = "I-Twilio-Idempotency-Token"
# Sent with webhooks signed by a SharedKey: "key=<id>,algorithm=HMAC_SHA256".
SIGNATURE_SETTINGS = "X-Twilio-Webhooks-Signature-Settings"
ALGORITHMS = {"HMAC_SHA1": hashlib.sha1, "HMAC_SHA256": hashlib.sha256}
BODY_HASH = "bodySHA256"

# (SID field, status fields, type prefix), most specific first: a recording's callback
# also carries the CallSid of its call.
RESOURCES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("TranscriptionSid", ("TranscriptionStatus",), "transcription"),
    ("RecordingSid", ("RecordingStatus",), "recording"),
    ("ConferenceSid", ("StatusCallbackEvent",), "conference"),
    ("MessageSid", ("MessageStatus", "SmsStatus"), "message"),
    ("CallSid", ("CallStatus",), "call"),
)

Params = list[tuple[str, str]]


def _signature(secret: str, url: str, params: Params, algorithm: str = "HMAC_SHA1") -> str:
    """As twilio-python's RequestValidator: names sorted, each name's values sorted and
    de-duplicated, appended as name + value."""
    grouped: dict[str, set[str]] = {}
    for name, value in params:
        grouped.setdefault(name, set()).add(value)
    message = url + "".join(
        name + value for name in sorted(grouped) for value in sorted(grouped[name])
    )
    digest = hmac.new(secret.encode(), message.encode(), ALGORITHMS[algorithm]).digest()
    return base64.b64encode(digest).decode()


def url_variants(url: str) -> list[str]:
    """The URL without its port and with the scheme's port made explicit (Twilio's SDK
    accepts either, since Twilio signs some requests one way and some the other)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return [url]
    host = parts.netloc.rsplit(":", 1)[0] if port is not None else parts.netloc
    default = 443 if parts.scheme == "https" else 80
    without = urlunsplit(parts._replace(netloc=host))
    with_port = urlunsplit(parts._replace(netloc=f"{host}:{port or default}"))
    return [without, with_port]


def form_params(body: bytes) -> Params:
    try:
        return parse_qsl(
            body.decode(), keep_blank_values=True, strict_parsing=True, errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise MalformedRequest(
            "body is neither a form post nor covered by bodySHA256", reason="malformed_body"
        ) from None


class TwilioProvider(Provider):
    name = "twilio"
    # Webhook retries (#rc connection overrides) end within 15 s; Event Streams retries
    # for up to four hours. A day covers both with room.
    retry_window = timedelta(days=1)

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        signature = require_header(delivery, SIGNATURE)
        algorithm = self._algorithm(delivery)
        require_secrets(secrets)
        body_hash = delivery.query.get(BODY_HASH)
        params = [] if body_hash is not None else form_params(delivery.body)
        expected = [
            _signature(secret, url, params, algorithm)
            for secret in secrets
            for url in url_variants(delivery.url)
        ]
        if not any_digest_matches(expected, [signature]):
            raise VerificationError("the signature matches no active auth token")
        if body_hash is not None and not any_digest_matches(
            [hashlib.sha256(delivery.body).hexdigest()], [body_hash.lower()]
        ):
            raise VerificationError("the body does not match the URL's bodySHA256")

    @staticmethod
    def _algorithm(delivery: Delivery) -> str:
        settings = delivery.header(SIGNATURE_SETTINGS) or ""
        for part in settings.split(","):
            key, _, value = part.partition("=")
            if key.strip() == "algorithm" and value.strip():
                algorithm = value.strip().upper()
                if algorithm not in ALGORITHMS:
                    raise MalformedRequest(
                        f"{SIGNATURE_SETTINGS} names an unknown algorithm {value.strip()!r}",
                        reason="malformed_header",
                    )
                return algorithm
        return "HMAC_SHA1"

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        if BODY_HASH in delivery.query:
            return self._cloud_events(delivery.body)
        params = dict(form_params(delivery.body))
        if not params:
            raise MalformedRequest("the form post holds no parameter", reason="malformed_body")
        event_type, resource_key = self._resource(params)
        token = delivery.header(IDEMPOTENCY_HEADER)
        external_id = token or resource_key  # the form fields are signed; the header is not
        if not external_id:
            raise MalformedRequest(
                f"no {IDEMPOTENCY_HEADER} header and no resource SID to deduplicate on",
                reason="malformed_body",
            )
        return [
            IncomingEvent(
                external_id=external_id,
                type=event_type,
                occurred_at=self._timestamp(params.get("Timestamp")),
                id_signed=not token,
            )
        ]

    @staticmethod
    def _resource(params: Mapping[str, str]) -> tuple[str, str | None]:
        """The event type and the SID-based dedupe key (None when no SID is known)."""
        for sid_field, status_fields, resource in RESOURCES:
            sid = params.get(sid_field)
            if not sid:
                continue
            status = next((params[f] for f in status_fields if params.get(f)), None)
            key = ":".join(part for part in (sid, status, params.get("SequenceNumber")) if part)
            return (f"{resource}.{status.lower()}" if status else resource), key
        return "webhook", None

    @staticmethod
    def _timestamp(value: str | None) -> datetime | None:
        if not value:
            return None
        try:
            return parsedate_to_datetime(value).astimezone(UTC)
        except (TypeError, ValueError, OverflowError):  # past the year 9999 once in UTC
            return None

    @staticmethod
    def _cloud_events(body: bytes) -> list[IncomingEvent]:
        payload = load_json(body)
        items = payload if isinstance(payload, list) else [payload]
        events = []
        for item in items:
            if not isinstance(item, dict):
                raise MalformedRequest("a CloudEvent must be an object", reason="malformed_body")
            event_id, event_type = id_and_type(item, what="a CloudEvent")
            when = occurred_at(item.get("time"))
            # The body is signed through its hash (bodySHA256 in the signed URL).
            events.append(IncomingEvent(event_id, event_type, when, id_signed=True))
        if not events:
            raise MalformedRequest("the body holds no event", reason="malformed_body")
        return events

    def payload(self, headers: Mapping[str, str], body: bytes) -> JSON:
        """Form posts as a dict (a repeated name maps to the list of its values)."""
        try:
            return load_json(body)
        except MalformedRequest:
            pass
        try:
            params = form_params(body)
        except MalformedRequest:
            return None
        fields: JSONObject = {}
        for name, value in params:
            previous = fields.get(name)
            if previous is None:
                fields[name] = value
            elif isinstance(previous, list):
                previous.append(value)
            else:
                fields[name] = [previous, value]
        return fields

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        params = [] if BODY_HASH in delivery.query else form_params(delivery.body)
        return {SIGNATURE: _signature(secret, delivery.url, params)}

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        params = {
            "AccountSid": "AC00000000000000000000000000000000",
            "MessageSid": f"SMdemo{stamp}",
            "SmsSid": f"SMdemo{stamp}",
            "MessageStatus": "delivered",
            "SmsStatus": "delivered",
            "From": "+15005550006",
            "To": "+15005550009",
            "ApiVersion": "2010-04-01",
        }
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            IDEMPOTENCY_HEADER: f"demo-{stamp}",
        }
        return headers, urlencode(params).encode()
