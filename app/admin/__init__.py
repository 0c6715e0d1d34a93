"""The admin API: events, their attempts, and replays, behind a bearer token."""
