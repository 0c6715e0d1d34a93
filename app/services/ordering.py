"""An endpoint's ordering as the operator changes it, and a parked key released: each
audited in the transaction that makes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Unpack

from hooklatch.endpoints.service import get_endpoint
from hooklatch.jsontypes import JSONObject
from hooklatch.ordering import service
from hooklatch.ordering.service import OrderingChanges
from hooklatch.runtime import Runtime


def show_ordering(runtime: Runtime, endpoint_ref: str) -> JSONObject:
    with runtime.session_factory() as session:
        return service.describe_ordering(get_endpoint(session, endpoint_ref))


@dataclass(frozen=True)
class OrderingChange:
    changed: bool  # False: the settings were those already
    ordering: JSONObject  # the settings now (``describe_ordering``)


def change_endpoint_ordering(
    runtime: Runtime,
    endpoint_ref: str,
    *,
    actor: str,
    **changes: Unpack[OrderingChanges],
) -> OrderingChange:
    """What is given changes (``key_path=""``: the provider's key again), audited; a
    setting that cannot be is a BadRequest (``bad_ordering``)."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        now = runtime.clock()
        changed = service.set_ordering(session, endpoint, actor=actor, now=now, **changes)
        return OrderingChange(changed=changed, ordering=service.describe_ordering(endpoint))


def release_parked_key(
    runtime: Runtime, endpoint_ref: str, key: str, *, actor: str, reason: str
) -> JSONObject:
    """The key's next event is handed out at once (the dispatcher is woken for it); the
    dead event that parked it stays dead. NotFound (``not_parked``) if it is not parked."""
    with runtime.session_factory.begin() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        released = service.release_key(
            session, endpoint, key, actor=actor, reason=reason, now=runtime.clock()
        )
    runtime.wake_dispatcher()
    return released
