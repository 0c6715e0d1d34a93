"""A provider checked with its own test deliveries, for ``python -m hooklatch.testing``
given a provider rather than a description: the body of its ``sample_event`` (with a
note added, which some checks change), signed by its own ``sign``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import timedelta

from hooklatch.providers.base import Provider
from hooklatch.providers.samples import cannot_sign
from hooklatch.testing.conformance import URL, ProviderConformance

NOTE_FIELD = "conformance_note"


class SampleConformance(ProviderConformance):
    """The provider's own sample and signer. What the kit would be told is found out: the
    signature headers are those ``sign`` gives, and a timestamp is signed where they
    change with the time."""

    # Made up for the checks (--secret and --other-secret replace them).
    secret = "conformance-secret-one"  # noqa: S105
    other_secret = "conformance-secret-two"  # noqa: S105

    def __init__(
        self,
        plugin: Provider,
        *,
        secret: str | None = None,
        other_secret: str | None = None,
        options: Mapping[str, str] | None = None,
    ) -> None:
        self._plugin = plugin
        self.provider = plugin.name
        self.secret = secret or self.secret
        self.other_secret = other_secret or self.other_secret
        self.options = dict(options or {})
        now = self.now()
        try:
            self._headers, self._body = plugin.sample_event(now=now)
        except NotImplementedError as exc:
            raise cannot_sign(plugin, "sample_event()") from exc
        try:
            signed = self.sign(self._body, secret=self.secret, now=now, url=URL)
            earlier = self.sign(
                self._body, secret=self.secret, now=now - timedelta(hours=1), url=URL
            )
        except NotImplementedError as exc:
            raise cannot_sign(plugin, "sign()") from exc
        self.signature_headers = tuple(signed)
        self.signs_timestamp = signed != earlier

    def plugin(self) -> Provider:
        return self._plugin

    def request_headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type, **self._headers}

    def event_body(self, event_id: str, *, note: str = "hello") -> bytes:
        return with_note(self._body, note)

    def expected_ids(self, event_id: str) -> tuple[str, ...] | None:
        return None  # the sample's own, whatever they are


def with_note(body: bytes, note: str) -> bytes:
    """A JSON body with ``note`` in a field of its own (of its first object, for a list)."""
    try:
        payload = json.loads(body)
    except ValueError:
        payload = None
    target = payload[0] if isinstance(payload, list) and payload else payload
    if not isinstance(target, dict):
        raise ValueError(
            "the provider's sample_event() body is not a JSON object or a list of them: "
            "describe the provider in a ProviderConformance subclass (docs/plugins.md)"
        )
    target[NOTE_FIELD] = note
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
