"""Every mapped class, imported together so Base.metadata is complete."""

from hooklatch.audit import AuditEntry
from hooklatch.endpoints.models import Endpoint, EndpointSecret, Refusal
from hooklatch.events.activity import ActivityCount
from hooklatch.events.models import (
    Attempt,
    BulkReplay,
    BulkReplayItem,
    Event,
    OutboxEntry,
    Replay,
)
from hooklatch.forwarding.models import Destination, Forward
from hooklatch.operations.models import (
    ConsoleSession,
    Heartbeat,
    TokenFailures,
)
from hooklatch.ordering.models import OrderingKey
from hooklatch.reconcile.models import (
    EndpointCredential,
    ProviderHook,
    ReconcileRun,
    ReconcileState,
)

__all__ = [
    "ActivityCount",
    "Attempt",
    "AuditEntry",
    "BulkReplay",
    "BulkReplayItem",
    "ConsoleSession",
    "Destination",
    "Endpoint",
    "EndpointCredential",
    "EndpointSecret",
    "Event",
    "Forward",
    "Heartbeat",
    "OrderingKey",
    "OutboxEntry",
    "ProviderHook",
    "ReconcileRun",
    "ReconcileState",
    "Refusal",
    "Replay",
    "TokenFailures",
]
