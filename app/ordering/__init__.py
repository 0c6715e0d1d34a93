"""Per-entity ordering: which events share a key, how a key's events are claimed, the
stale-event guard, and the keys that are blocked (docs/architecture.md, "Ordering")."""
