"""Every mapped class, imported together so Base.metadata is complete."""

from app.endpoints.models import Endpoint, EndpointSecret
from app.events.models import Attempt, Event, OutboxEntry, Replay

__all__ = ["Attempt", "Endpoint", "EndpointSecret", "Event", "OutboxEntry", "Replay"]
