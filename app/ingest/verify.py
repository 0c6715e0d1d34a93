"""Verifying a delivery against its endpoint's secrets, and counting a refusal.

A delivery is verified against the endpoint's cached copy before any connection is
taken, or against the endpoint read from the database (``views._ingest``). While it is
verified, the delivery's ``metrics.DeliveryTally`` learns the provider and the
fingerprint of the secret that verified it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime

from hooklatch import metrics
from hooklatch.endpoints.service import ActiveEndpoint
from hooklatch.errors import ProviderUnavailable, VerificationError
from hooklatch.providers.base import Delivery, Provider
from hooklatch.runtime import Runtime

# A refusal is logged under the route's name, which log filters may already select.
log = logging.getLogger("hooklatch.ingest.views")


def provider_for(runtime: Runtime, name: str) -> Provider:
    try:
        return runtime.provider(name)
    except LookupError as exc:
        raise ProviderUnavailable(str(exc)) from exc


@dataclass(frozen=True)
class Arrival:
    """A POST to ``/hooks/<endpoint_id>`` as it arrived, and the tally of its outcome."""

    endpoint_id: str
    url: str  # the public URL the provider called
    headers: dict[str, str]  # lower-case names
    body: bytes
    seen: metrics.DeliveryTally

    def delivery(self, endpoint: ActiveEndpoint) -> Delivery:
        return Delivery("POST", self.url, self.headers, self.body, endpoint.options)


def verified_by_cache(runtime: Runtime, arrival: Arrival) -> ActiveEndpoint | None:
    """The endpoint's cached copy if it verifies the delivery, before any connection is
    taken; None when nothing is cached or a refusal is to be confirmed by the database
    (``views._ingest`` reads it); the refusal itself while the endpoint's refusals outrun
    its rechecks (EndpointCache), so that a flood of bad signatures costs no database work."""
    cache = runtime.endpoints
    endpoint = cache.get(arrival.endpoint_id) if cache is not None else None
    if cache is None or endpoint is None:
        return None
    try:
        verify(runtime, endpoint, arrival.delivery(endpoint), arrival.seen)
    except VerificationError:
        if cache.may_recheck(arrival.endpoint_id):
            return None
        raise
    return endpoint


def verify(
    runtime: Runtime, endpoint: ActiveEndpoint, delivery: Delivery, seen: metrics.DeliveryTally
) -> None:
    seen.provider, seen.fingerprint = endpoint.provider, None
    provider = provider_for(runtime, endpoint.provider)
    now = runtime.clock()
    try:
        provider.verify(delivery, secrets=endpoint.secrets, now=now)
    except VerificationError as exc:
        # How many secrets were tried tells a rotation gone wrong at a glance.
        exc.facts.setdefault("provider", endpoint.provider)
        exc.facts.setdefault("active_secrets", len(endpoint.secrets))
        raise
    seen.fingerprint = _verifying_fingerprint(runtime, provider, endpoint, delivery, now)


def _verifying_fingerprint(
    runtime: Runtime,
    provider: Provider,
    endpoint: ActiveEndpoint,
    delivery: Delivery,
    now: datetime,
) -> str | None:
    """The fingerprint of the first of the endpoint's secrets that verifies the delivery
    alone: during a rotation the metrics show when the old one stops matching. Providers
    verify against all the secrets at once; with one, there is nothing to tell apart."""
    secrets = endpoint.secrets
    if len(secrets) > 1:
        for secret in secrets:
            try:
                provider.verify(delivery, secrets=[secret], now=now)
            except VerificationError:
                continue
            return runtime.box.fingerprint(secret)
    return runtime.box.fingerprint(secrets[0]) if secrets else None


def count_refusal(
    runtime: Runtime,
    endpoint_id: str,
    exc: VerificationError,
    headers: dict[str, str],
    body: bytes,
) -> None:
    """Count a refusal by endpoint and reason, in memory (the counts are written a few
    times per flush interval, not once per refusal), and log it with safe facts only
    (never a secret, never the body) when its count is written at once; the others are
    summed up when theirs is. Counting is best effort: it never changes the answer."""
    if not runtime.refusals.add(endpoint_id, exc.reason, now=runtime.clock()):
        return  # summed up in one line when its count is written (app/endpoints/refusals.py)
    facts = "".join(f"; {key} {value}" for key, value in sorted(exc.facts.items()))
    log.warning(
        "refused delivery: %s (%s); headers present: %s; body %d bytes sha256 %s%s",
        exc.reason,
        exc.message,
        ",".join(sorted(headers)),
        len(body),
        hashlib.sha256(body).hexdigest()[:16],
        facts,
        extra={"reason": exc.reason},
    )
