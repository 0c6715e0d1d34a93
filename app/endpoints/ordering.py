"""An endpoint's ordering settings: the policies its columns hold, and the settings ingest
and the worker read of an active endpoint. The ordering of events itself (keys, claims,
the stale guard) is hooklatch.ordering's."""

from __future__ import annotations

from dataclasses import dataclass

# Endpoint.ordering: events of one key run as they come (none), never two at once
# (serial), or one at a time in order, a failing one holding back the rest (fifo).
NONE = "none"
SERIAL = "serial"
FIFO = "fifo"
POLICIES = (NONE, SERIAL, FIFO)

# Endpoint.ordering_dead, under fifo: a dead event parks its key until someone acts
# (a replay that succeeds, or `hooklatch ordering release`), or releases it at once.
PARK = "park"
RELEASE = "release"
DEAD_POLICIES = (PARK, RELEASE)

# The longest hold window: events are held in the database, and a provider's
# out-of-order deliveries come seconds apart, not hours.
MAX_HOLD_SECONDS = 3600


@dataclass(frozen=True)
class OrderingSettings:
    """An endpoint's ordering: its policy, what a dead event does to its key under fifo,
    the hold window, and a key path that replaces the provider's ordering_key."""

    policy: str = NONE
    dead: str = PARK
    hold_seconds: int = 0
    key_path: str | None = None

    @property
    def keyed(self) -> bool:
        return self.policy != NONE

    @property
    def holds(self) -> bool:
        return self.policy == FIFO and self.hold_seconds > 0
