"""Endpoint and secret changes made by someone (the CLI, the console), each with its audit
entry in the same transaction. A secret is named by its fingerprint, never its value."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from hooklatch import audit
from hooklatch.crypto import SecretBox
from hooklatch.endpoints.models import Endpoint, EndpointSecret
from hooklatch.endpoints.service import add_secret, generate_secret, remove_secret
from hooklatch.errors import BadRequest
from hooklatch.jsontypes import JSONObject
from hooklatch.providers.base import Provider


def set_enabled(
    session: Session, endpoint: Endpoint, enabled: bool, *, actor: str, now: datetime
) -> None:
    if endpoint.enabled == enabled:
        return
    endpoint.enabled = enabled
    action = "endpoint_enabled" if enabled else "endpoint_disabled"
    details: JSONObject = {"name": endpoint.name, "provider": endpoint.provider}
    _record(session, endpoint, action, details, actor=actor, now=now)


def created(session: Session, endpoint: Endpoint, *, actor: str, now: datetime) -> None:
    details: JSONObject = {"name": endpoint.name, "provider": endpoint.provider}
    details["secrets"] = [s.fingerprint for s in endpoint.secrets]
    _record(session, endpoint, "endpoint_created", details, actor=actor, now=now)


def secret_to_add(provider: Provider, given: str | None) -> tuple[str, bool]:
    """The secret to add and whether it was generated: the one given, else one generated
    where the receiver chooses it (GitHub). Where the provider chooses it (Stripe), one
    must be given: 400 ``empty_secret``."""
    if given:
        return given, False
    if not provider.generates_secret:
        raise BadRequest(
            f"{provider.name} chooses its signing secrets: paste the one it shows",
            reason="empty_secret",
        )
    return generate_secret(), True


def secret_added(
    session: Session,
    endpoint: Endpoint,
    secret: str,
    *,
    box: SecretBox,
    actor: str,
    now: datetime,
) -> EndpointSecret:
    row = add_secret(session, endpoint, secret, box=box)
    _record(session, endpoint, "secret_added", _named(row), actor=actor, now=now)
    return row


def secret_removed(
    session: Session, endpoint: Endpoint, secret_ref: str, *, actor: str, now: datetime
) -> EndpointSecret:
    row = remove_secret(session, endpoint, secret_ref)
    _record(session, endpoint, "secret_removed", _named(row), actor=actor, now=now)
    return row


def _named(secret: EndpointSecret) -> JSONObject:
    """A secret as the audit log names it: never its value."""
    return {"fingerprint": secret.fingerprint, "secret_id": secret.id}


def _record(
    session: Session,
    endpoint: Endpoint,
    action: str,
    details: JSONObject,
    *,
    actor: str,
    now: datetime,
) -> None:
    """The audit entry of a change to ``endpoint``, in the transaction that makes it."""
    target = f"endpoint {endpoint.id}"
    audit.record(session, actor=actor, action=action, target=target, now=now, details=details)
