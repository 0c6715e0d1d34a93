"""The relay: outbox rows become queue jobs; lost work and due retries go out again."""
