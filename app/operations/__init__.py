"""Running hooklatch for months: retention, heartbeats, status."""
