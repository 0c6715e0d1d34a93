"""Endpoints as the CLI, the admin API and the console show them, and listed a page at a
time. A secret is shown by its id and fingerprint; its value only where it was just
generated, once."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from hooklatch.endpoints.models import Endpoint, EndpointSecret
from hooklatch.endpoints.service import endpoint_url, get_endpoint, shown_options
from hooklatch.jsontypes import JSONObject


def describe_secret(secret: EndpointSecret) -> JSONObject:
    last = secret.last_verified_at
    return {
        "id": secret.id,
        "fingerprint": secret.fingerprint,
        "created_at": secret.created_at.isoformat(),
        "last_verified_at": last.isoformat() if last else None,
    }


def ordering_of(endpoint: Endpoint) -> JSONObject:
    """Its ordering settings (hooklatch.endpoints.ordering), as the endpoint's description
    and the ordering commands and routes show them."""
    return {
        "policy": endpoint.ordering,
        "dead": endpoint.ordering_dead,
        "hold_seconds": endpoint.hold_seconds,
        "key_path": endpoint.ordering_key_path,
    }


def describe_endpoint(endpoint: Endpoint, *, public_url: str) -> JSONObject:
    """Its URL, secrets by fingerprint, options (secret ones masked) and ordering."""
    return {
        "id": endpoint.id,
        "name": endpoint.name,
        "provider": endpoint.provider,
        "enabled": endpoint.enabled,
        "created_at": endpoint.created_at.isoformat(),
        "url": endpoint_url(public_url, endpoint),
        "secrets": [describe_secret(s) for s in endpoint.secrets],
        "options": {**shown_options(endpoint.options)},
        "ordering": ordering_of(endpoint),
    }


def page(
    session: Session, *, after: str | None = None, limit: int | None = None
) -> tuple[Sequence[Endpoint], str | None]:
    """Endpoints oldest first, those after endpoint ``after`` (id or name), ``limit`` of
    them (None: all); and the ``after`` of the next page (None: the last)."""
    query = select(Endpoint).order_by(Endpoint.created_at, Endpoint.id)
    if after is not None:
        last = get_endpoint(session, after)
        query = query.where(
            or_(
                Endpoint.created_at > last.created_at,
                and_(Endpoint.created_at == last.created_at, Endpoint.id > last.id),
            )
        )
    if limit is None:
        return session.scalars(query).all(), None
    rows = session.scalars(query.limit(limit + 1)).all()
    if len(rows) > limit:
        return rows[:limit], rows[limit - 1].id
    return rows, None
