"""generic-hmac: an HMAC signature verifier configured per endpoint, for providers without
a plugin of their own.

The endpoint's options say where the signature is and what it covers::

    hooklatch endpoints add acme --provider generic-hmac \\
        --option header=X-Acme-Signature --option prefix=sha256= \\
        --option signed=timestamp.body --option timestamp_header=X-Acme-Timestamp \\
        --option id_header=X-Acme-Delivery --option type_field=type

``signed`` is ``body`` (the raw body), ``timestamp.body`` (the unix time from
``timestamp_header``, a dot, the body: Stripe's layout) or ``url+body`` (the public URL
the provider called, then the body: Square's). The secret is used as its UTF-8 bytes.

Every endpoint must say where the dedupe key is: ``id_header`` or ``id_field`` (a dotted
path into a JSON body, e.g. ``event.id``). There is deliberately no default such as a hash
of the body: it would merge two genuine events that happen to have the same body, and
fail to recognise a retry whose body changed (an attempt counter), silently both times.
A configuration without an id is refused when the endpoint is created instead, and a
delivery lacking its id is refused (400) rather than stored under a guessed one.

The type comes from ``type_header`` or ``type_field``, or is ``webhook`` when neither is
set.

An id read from ``id_header`` is not signed: a delivery of a stored id with another body
is kept as an event of its own, a conflict (docs/plugins.md, "Event ids"), so that no one
who has seen a signed body can silence a future event by sending it under that event's
id. A sender whose retries of one event differ in body (an attempt counter, a send time)
would then run each retry: ``retries_change_body=true`` makes such deliveries duplicates
again, which gives that protection up for the endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hooklatch.errors import MalformedRequest, VerificationError
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import Delivery, IncomingEvent, Provider, require_header
from hooklatch.providers.keys import dotted
from hooklatch.providers.parsing import json_object, unix_time, unix_timestamp
from hooklatch.providers.signing import check_signatures, check_timestamp

ALGORITHMS = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha512": hashlib.sha512}
ENCODINGS = ("hex", "base64")
SIGNED = ("body", "timestamp.body", "url+body")
DEFAULT_TYPE = "webhook"
MAX_ID_LENGTH = 255  # events.external_id
MAX_TOLERANCE_SECONDS = 366 * 86400
HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")
FIELD_PATH = re.compile(r"^[^.]+(\.[^.]+)*$")


@dataclass(frozen=True)
class Config:
    header: str
    algorithm: str = "sha256"
    encoding: str = "hex"
    prefix: str = ""
    signed: str = "body"
    timestamp_header: str | None = None
    tolerance_seconds: int = 300
    id_header: str | None = None
    id_field: str | None = None
    type_header: str | None = None
    type_field: str | None = None
    retries_change_body: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> Config:
        """Validated options; ValueError names the first bad one."""
        if not options.get("header"):
            raise ValueError("generic-hmac needs the option 'header': the signature's header")
        for name in ("header", "timestamp_header", "id_header", "type_header"):
            if name in options and not HEADER_NAME.match(options[name]):
                raise ValueError(f"generic-hmac option {name!r} is not a header name")
        for name in ("id_field", "type_field"):
            if name in options and not FIELD_PATH.match(options[name]):
                raise ValueError(
                    f"generic-hmac option {name!r} must be a dotted path such as event.id"
                )
        _one_of(options, "algorithm", tuple(ALGORITHMS))
        _one_of(options, "encoding", ENCODINGS)
        _one_of(options, "signed", SIGNED)
        signs_time = options.get("signed") == "timestamp.body"
        if signs_time != ("timestamp_header" in options):
            raise ValueError(
                "generic-hmac option 'timestamp_header' is required with "
                "signed=timestamp.body, and only then"
            )
        if "tolerance_seconds" in options and not signs_time:
            raise ValueError(
                "generic-hmac option 'tolerance_seconds' applies only to signed=timestamp.body"
            )
        tolerance = options.get("tolerance_seconds", "300")
        whole = tolerance.isascii() and tolerance.isdigit() and len(tolerance) < 10
        seconds = int(tolerance) if whole else 0
        if not 1 <= seconds <= MAX_TOLERANCE_SECONDS:
            raise ValueError(
                f"generic-hmac option 'tolerance_seconds' must be a whole number of seconds "
                f"from 1 to {MAX_TOLERANCE_SECONDS}, got {tolerance!r}"
            )
        if ("id_header" in options) == ("id_field" in options):
            raise ValueError(
                "generic-hmac needs exactly one of the options 'id_header' and 'id_field': "
                "where each delivery's dedupe key is"
            )
        if "type_header" in options and "type_field" in options:
            raise ValueError("generic-hmac takes one of 'type_header' and 'type_field', not both")
        _one_of(options, "retries_change_body", ("true", "false"))
        if options.get("retries_change_body") == "true" and "id_header" not in options:
            raise ValueError(
                "generic-hmac option 'retries_change_body' applies only to id_header: an id "
                "from the signed body is the sender's own"
            )
        derived = ("tolerance_seconds", "retries_change_body")
        values: dict[str, Any] = {k: v for k, v in options.items() if k not in derived}
        return cls(
            **values,
            tolerance_seconds=seconds,
            retries_change_body=options.get("retries_change_body") == "true",
        )


def _one_of(options: Mapping[str, str], name: str, allowed: tuple[str, ...]) -> None:
    if name in options and options[name] not in allowed:
        raise ValueError(
            f"generic-hmac option {name!r} must be one of {', '.join(allowed)}, "
            f"got {options[name]!r}"
        )


def _config(delivery: Delivery) -> Config:
    try:
        return Config.from_options(delivery.options)
    except ValueError as exc:  # options are checked at creation: only a hand-edited row
        raise VerificationError(str(exc), reason="bad_option") from exc


class GenericHmacProvider(Provider):
    name = "generic-hmac"
    # Unknown providers: longer than any retry schedule listed in PROVIDERS.md but
    # Meta's (7 days), which it matches.
    retry_window = timedelta(days=7)
    options = {
        "header": "the header carrying the signature (required)",
        "algorithm": "sha1, sha256 or sha512 (default sha256)",
        "encoding": "hex or base64 (default hex)",
        "prefix": "text before the signature in the header, e.g. sha256= (default none)",
        "signed": "body (default), timestamp.body or url+body",
        "timestamp_header": "the header with the signed unix time (signed=timestamp.body)",
        "tolerance_seconds": "largest clock difference accepted (default 300)",
        "id_header": "the header with the dedupe key (this or id_field is required)",
        "id_field": "dotted path to the dedupe key in a JSON body, e.g. event.id",
        "type_header": "the header with the event type",
        "type_field": "dotted path to the event type in a JSON body, e.g. type",
        "retries_change_body": (
            "true when the sender's retries of one event differ in body (with id_header): "
            "another body under a stored id is then a duplicate, not a conflict kept apart, "
            "and anyone who has seen a signed body can silence a future event (default false)"
        ),
    }

    def check_options(self, options: Mapping[str, str]) -> dict[str, str]:
        checked = super().check_options(options)
        Config.from_options(checked)
        return checked

    def verify(self, delivery: Delivery, *, secrets: Sequence[str], now: datetime) -> None:
        config = _config(delivery)
        received = require_header(delivery, config.header, prefix=config.prefix)
        received = received[len(config.prefix) :].strip()
        if config.encoding == "hex":
            received = received.lower()
        timestamp = self._timestamp(delivery, config)
        message = self._message(delivery, config, timestamp)
        check_signatures(
            [received], secrets=secrets, sign=lambda secret: _signature(config, secret, message)
        )
        if timestamp is not None:
            check_timestamp(
                timestamp, now=now, tolerance=timedelta(seconds=config.tolerance_seconds)
            )

    @staticmethod
    def _timestamp(delivery: Delivery, config: Config) -> int | None:
        if config.timestamp_header is None:
            return None
        timestamp = unix_timestamp(require_header(delivery, config.timestamp_header).strip())
        if timestamp is None:
            raise MalformedRequest(
                f"{config.timestamp_header} must be a unix time in seconds",
                reason="malformed_header",
            )
        return timestamp

    @staticmethod
    def _message(delivery: Delivery, config: Config, timestamp: int | None) -> bytes:
        if config.signed == "timestamp.body":
            return f"{timestamp}.".encode() + delivery.body
        if config.signed == "url+body":
            return delivery.url.encode() + delivery.body
        return delivery.body

    def parse(self, delivery: Delivery) -> list[IncomingEvent]:
        config = _config(delivery)
        payload: JSONObject | None = None
        if config.id_field or config.type_field:
            payload = json_object(delivery.body)
        if config.id_header:
            external_id: JSON = require_header(delivery, config.id_header)
        else:
            external_id = dotted(payload or {}, config.id_field or "")
        if isinstance(external_id, int) and not isinstance(external_id, bool):
            external_id = str(external_id)
        if not isinstance(external_id, str) or not external_id:
            raise MalformedRequest(
                f"the body has no string or number at {config.id_field}", reason="malformed_body"
            )
        if len(external_id) > MAX_ID_LENGTH:
            raise MalformedRequest(
                f"the dedupe key is longer than {MAX_ID_LENGTH} characters",
                reason="malformed_body",
            )
        event_type = self._type(delivery, config, payload)
        stamp = delivery.header(config.timestamp_header) if config.timestamp_header else None
        occurred_at = unix_time(unix_timestamp(stamp.strip())) if stamp else None
        # An id from the body is signed in every mode; one from a header is not, but an
        # endpoint whose sender changes the body on retries takes it as its own.
        signed = not config.id_header or config.retries_change_body
        return [IncomingEvent(external_id, event_type, occurred_at, id_signed=signed)]

    @staticmethod
    def _type(delivery: Delivery, config: Config, payload: JSONObject | None) -> str:
        if config.type_header:
            return require_header(delivery, config.type_header)
        if config.type_field:
            value = dotted(payload or {}, config.type_field)
            if not isinstance(value, str) or not value:
                raise MalformedRequest(
                    f"the body has no string at {config.type_field}", reason="malformed_body"
                )
            return value
        return DEFAULT_TYPE

    def sign(self, delivery: Delivery, *, secret: str, now: datetime) -> dict[str, str]:
        """The signature, plus the id and type headers a test delivery needs."""
        config = Config.from_options(delivery.options)
        stamp = int(now.timestamp())
        headers = {}
        if config.timestamp_header:
            headers[config.timestamp_header] = str(stamp)
        message = self._message(delivery, config, stamp)
        headers[config.header] = config.prefix + _signature(config, secret, message)
        if config.id_header and not delivery.header(config.id_header):
            headers[config.id_header] = f"demo-{stamp}"
        if config.type_header and not delivery.header(config.type_header):
            headers[config.type_header] = "demo.event"
        return headers

    def sample_event(self, *, now: datetime) -> tuple[dict[str, str], bytes]:
        stamp = int(now.timestamp())
        payload = {"id": f"demo-{stamp}", "type": "demo.event", "created": stamp}
        return {"Content-Type": "application/json"}, json.dumps(payload).encode()


def _signature(config: Config, secret: str, message: bytes) -> str:
    digest = hmac.new(secret.encode(), message, ALGORITHMS[config.algorithm]).digest()
    return digest.hex() if config.encoding == "hex" else base64.b64encode(digest).decode()
