"""An event's idempotency key: what its handlers get as ``ctx.idempotency_key``, and what
every forward of it carries, so that a system downstream can keep its own dedupe barrier."""

from __future__ import annotations

# How much of a conflicting delivery's body digest its idempotency key carries.
VARIANT_IN_KEY = 16


def idempotency_key(endpoint_id: str, external_id: str, variant: str) -> str:
    """The same on every attempt, replay and forward of an event. A conflicting delivery
    (another body under a stored event's id) adds its body digest's first hex digits, so
    that a system downstream does not take it for the event it conflicts with."""
    key = f"hooklatch:{endpoint_id}:{external_id}"
    return f"{key}:{variant[:VARIANT_IN_KEY]}" if variant else key
