"""Every mapped class, imported together so Base.metadata is complete."""

from hooklatch.endpoints.models import Endpoint, EndpointSecret
from hooklatch.events.models import Attempt, Event, OutboxEntry, Replay
from hooklatch.operations.models import Heartbeat

__all__ = ["Attempt", "Endpoint", "EndpointSecret", "Event", "Heartbeat", "OutboxEntry", "Replay"]
