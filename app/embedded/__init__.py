"""The embedded default and the commands that try hooklatch out: `hooklatch serve` (SQLite,
no Redis, handlers in the web process, a demo endpoint) and `hooklatch send-test`."""
