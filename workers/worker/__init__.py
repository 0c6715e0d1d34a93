"""The worker: an RQ worker whose jobs claim events and run their handlers."""
