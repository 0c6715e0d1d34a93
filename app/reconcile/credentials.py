"""An endpoint's credential for its provider's API: stored encrypted like its secrets,
named by its field names and a fingerprint, never shown. Functions take the session first
and never commit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from hooklatch.crypto import SecretBox
from hooklatch.endpoints.models import Endpoint
from hooklatch.errors import BadRequest, NotFound, SecretUnavailable
from hooklatch.jsontypes import JSON, JSONObject
from hooklatch.providers.base import Provider
from hooklatch.providers.remote import Place, RemoteAPI
from hooklatch.reconcile.models import EndpointCredential, ProviderHook


def set_credential(
    session: Session,
    endpoint: Endpoint,
    provider: Provider,
    values: Mapping[str, str],
    *,
    box: SecretBox,
) -> EndpointCredential:
    """Store (or replace: a rotation) the endpoint's credential, checked by its provider."""
    try:
        checked = provider.check_credentials(dict(values))
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_credential") from exc
    plaintext = json.dumps(checked, sort_keys=True)
    row = session.get(EndpointCredential, endpoint.id)
    if row is None:
        row = EndpointCredential(endpoint_id=endpoint.id)
        session.add(row)
    row.ciphertext = box.encrypt(plaintext)
    row.fingerprint = box.fingerprint(plaintext)
    row.fields = ",".join(sorted(checked))
    session.flush()
    return row


def remove_credential(session: Session, endpoint: Endpoint) -> EndpointCredential:
    row = session.get(EndpointCredential, endpoint.id)
    if row is None:
        raise NotFound(f"endpoint {endpoint.id} has no credential")
    session.delete(row)
    session.flush()
    return row


def credential_values(session: Session, endpoint_id: str, *, box: SecretBox) -> dict[str, str]:
    """The decrypted credential; NotFound (reason no_credential) without one."""
    row = session.get(EndpointCredential, endpoint_id)
    if row is None:
        raise NotFound(
            f"endpoint {endpoint_id} has no credential for its provider's API "
            f"(hooklatch endpoints credential set {endpoint_id})",
            reason="no_credential",
        )
    try:
        values: dict[str, str] = json.loads(box.decrypt(row.ciphertext))
    except ValueError as exc:
        raise SecretUnavailable(str(exc)) from exc
    return values


def described(row: EndpointCredential | None) -> JSONObject | None:
    """A credential as every face shows it: field names, fingerprint, when set."""
    if row is None:
        return None
    return {
        "fields": list[JSON](row.fields.split(",")),
        "fingerprint": row.fingerprint,
        "created_at": row.created_at.isoformat(),
    }


def rotate_credentials(session: Session, box: SecretBox) -> int:
    """Re-encrypt every credential with the first key (``hooklatch keys rotate``)."""
    rotated = 0
    for row in session.scalars(select(EndpointCredential)):
        row.ciphertext = box.rotate(row.ciphertext)
        row.fingerprint = box.fingerprint(box.decrypt(row.ciphertext))
        rotated += 1
    session.flush()
    return rotated


@dataclass(frozen=True)
class Reach:
    """What it takes to call an endpoint's provider API: the provider, its API object,
    and where the webhook lives."""

    provider: Provider
    api: RemoteAPI
    place: Place


def reach(session: Session, endpoint: Endpoint, provider: Provider, *, box: SecretBox) -> Reach:
    """The provider's API for this endpoint, with its credential and its hook's place."""
    values = credential_values(session, endpoint.id, box=box)
    hook = session.get(ProviderHook, endpoint.id)
    place = (
        Place(api_url=hook.api_url, scope=hook.scope, hook_id=hook.hook_id)
        if hook is not None
        else Place()
    )
    try:
        api = provider.remote(values, place)
    except NotImplementedError as exc:
        raise BadRequest(str(exc), reason="no_provider_api") from exc
    except ValueError as exc:
        raise BadRequest(str(exc), reason="bad_place") from exc
    return Reach(provider, api, place)
