"""An endpoint as the operator looks at it: the CLI's `endpoints show`, the admin API's
``GET /admin/endpoints/<endpoint>`` and the console's endpoint page."""

from __future__ import annotations

from hooklatch.endpoints.serialize import describe_endpoint
from hooklatch.endpoints.service import get_endpoint, refusal_counts
from hooklatch.events.serialize import conflicts, repeated_bodies
from hooklatch.jsontypes import JSONObject
from hooklatch.runtime import Runtime


def endpoint_details(runtime: Runtime, endpoint_ref: str, *, reveal: bool = False) -> JSONObject:
    """By id or name: ``describe_endpoint``, with its refused deliveries by reason, and how
    many of its events repeat an earlier event's body, or its id with another body; with
    ``reveal``, its secrets' values too (``secret_values``)."""
    with runtime.session_factory() as session:
        endpoint = get_endpoint(session, endpoint_ref)
        details: JSONObject = {
            **describe_endpoint(endpoint, public_url=runtime.settings.public_url),
            "refused": [*refusal_counts(session, endpoint.id)],
            "repeated_bodies": repeated_bodies(session, endpoint.id),
            "conflicts": conflicts(session, endpoint.id),
        }
        if reveal:
            details["secret_values"] = [runtime.box.decrypt(s.ciphertext) for s in endpoint.secrets]
    return details
