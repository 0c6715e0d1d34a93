"""The provider plugin contract: what a plugin package imports (docs/plugins.md)::

    from hooklatch.providers import Delivery, IncomingEvent, Provider, VerificationError

Plugins are registered under the ``hooklatch.providers`` entry-point group, the built-in
ones the same way, and checked when a process starts (``hooklatch.providers.loading``).
"""

from hooklatch.errors import Forbidden, MalformedRequest, VerificationError
from hooklatch.providers.base import (
    Delivery,
    HandshakeResponse,
    IncomingEvent,
    Provider,
    require_header,
)
from hooklatch.providers.parsing import (
    id_and_type,
    json_digest,
    json_object,
    load_json,
    occurred_at,
    unix_time,
    unix_timestamp,
)
from hooklatch.providers.signing import (
    any_digest_matches,
    check_signatures,
    check_timestamp,
    hmac_base64,
    hmac_hex,
    hmac_sha256,
    require_secrets,
    timestamped_signatures,
)

__all__ = [
    "Delivery",
    "Forbidden",
    "HandshakeResponse",
    "IncomingEvent",
    "MalformedRequest",
    "Provider",
    "VerificationError",
    "any_digest_matches",
    "check_signatures",
    "check_timestamp",
    "hmac_base64",
    "hmac_hex",
    "hmac_sha256",
    "id_and_type",
    "json_digest",
    "json_object",
    "load_json",
    "occurred_at",
    "require_header",
    "require_secrets",
    "timestamped_signatures",
    "unix_time",
    "unix_timestamp",
]
