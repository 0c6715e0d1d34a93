"""Events as stored: the events, outbox, attempts and replays tables, and what reads them."""
